package kvtest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The check must be able to fail: a lost update and a stale read are
// caught, and their correct counterparts pass.
func TestModelRejectsLostUpdate(t *testing.T) {
	op := func(client int, call, ret int64, in lin, out linOut) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	add := op(0, 0, 1, lin{op: "add", key: "k", value: "a"}, linOut{kind: "ok"})
	// Two updates from version 1 both succeed: one was lost.
	lost := []porcupine.Operation{add,
		op(1, 2, 5, lin{op: "update", key: "k", version: 1, value: "b"}, linOut{kind: "ok", version: 2}),
		op(2, 3, 6, lin{op: "update", key: "k", version: 1, value: "c"}, linOut{kind: "ok", version: 2}),
	}
	if porcupine.CheckOperations(linModel, lost) {
		t.Fatal("a lost update was accepted")
	}
	fine := []porcupine.Operation{add,
		op(1, 2, 5, lin{op: "update", key: "k", version: 1, value: "b"}, linOut{kind: "ok", version: 2}),
		op(2, 3, 6, lin{op: "update", key: "k", version: 1, value: "c"}, linOut{kind: "stale", version: 2}),
	}
	if !porcupine.CheckOperations(linModel, fine) {
		t.Fatal("a correct history was refused")
	}
	// A read that starts after an update returned must see it.
	staleRead := []porcupine.Operation{add,
		op(1, 2, 3, lin{op: "update", key: "k", version: 1, value: "b"}, linOut{kind: "ok", version: 2}),
		op(2, 4, 5, lin{op: "get", key: "k"}, linOut{kind: "ok", version: 1, value: "a"}),
	}
	if porcupine.CheckOperations(linModel, staleRead) {
		t.Fatal("a stale read was accepted")
	}
}
