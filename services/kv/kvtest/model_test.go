package kvtest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The check must be able to fail: a lost update and a stale read are
// caught, and their correct counterparts pass.
func TestModelRejectsLostUpdate(t *testing.T) {
	op := func(client int, call, ret int64, in Input, out Output) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	add := op(0, 0, 1, Input{Op: "add", Key: "k", Value: "a"}, Output{Kind: "ok"})
	// Two updates from version 1 both succeed: one was lost.
	lost := []porcupine.Operation{add,
		op(1, 2, 5, Input{Op: "update", Key: "k", Version: 1, Value: "b"}, Output{Kind: "ok", Version: 2}),
		op(2, 3, 6, Input{Op: "update", Key: "k", Version: 1, Value: "c"}, Output{Kind: "ok", Version: 2}),
	}
	if porcupine.CheckOperations(Model, lost) {
		t.Fatal("a lost update was accepted")
	}
	fine := []porcupine.Operation{add,
		op(1, 2, 5, Input{Op: "update", Key: "k", Version: 1, Value: "b"}, Output{Kind: "ok", Version: 2}),
		op(2, 3, 6, Input{Op: "update", Key: "k", Version: 1, Value: "c"}, Output{Kind: "stale", Version: 2}),
	}
	if !porcupine.CheckOperations(Model, fine) {
		t.Fatal("a correct history was refused")
	}
	// A read that starts after an update returned must see it.
	staleRead := []porcupine.Operation{add,
		op(1, 2, 3, Input{Op: "update", Key: "k", Version: 1, Value: "b"}, Output{Kind: "ok", Version: 2}),
		op(2, 4, 5, Input{Op: "get", Key: "k"}, Output{Kind: "ok", Version: 1, Value: "a"}),
	}
	if porcupine.CheckOperations(Model, staleRead) {
		t.Fatal("a stale read was accepted")
	}
}

// An operation of unknown outcome (a timeout) may have taken effect or not,
// but nothing else: the model accepts either reading of it and still
// catches a read that no ordering explains.
func TestModelUnknownOutcome(t *testing.T) {
	op := func(client int, call, ret int64, in Input, out Output) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	const never = 1 << 40
	add := op(0, 0, 1, Input{Op: "add", Key: "k", Value: "a"}, Output{Kind: OK})
	lostUpdate := op(1, 2, never, Input{Op: "update", Key: "k", Version: 1, Value: "b"}, Output{Kind: Unknown})
	took := []porcupine.Operation{add, lostUpdate,
		op(2, 10, 11, Input{Op: "get", Key: "k"}, Output{Kind: OK, Version: 2, Value: "b"}),
	}
	if !porcupine.CheckOperations(Model, took) {
		t.Fatal("an unknown update that took effect was refused")
	}
	notTook := []porcupine.Operation{add, lostUpdate,
		op(2, 10, 11, Input{Op: "get", Key: "k"}, Output{Kind: OK, Version: 1, Value: "a"}),
	}
	if !porcupine.CheckOperations(Model, notTook) {
		t.Fatal("an unknown update that did not take effect was refused")
	}
	// Once a read saw it, a later read may not miss it.
	flicker := []porcupine.Operation{add, lostUpdate,
		op(2, 10, 11, Input{Op: "get", Key: "k"}, Output{Kind: OK, Version: 2, Value: "b"}),
		op(2, 12, 13, Input{Op: "get", Key: "k"}, Output{Kind: OK, Version: 1, Value: "a"}),
	}
	if porcupine.CheckOperations(Model, flicker) {
		t.Fatal("a write seen and then unseen was accepted")
	}
	// An unknown update writes the value it was given, nothing else.
	wrongValue := []porcupine.Operation{add, lostUpdate,
		op(2, 10, 11, Input{Op: "get", Key: "k"}, Output{Kind: OK, Version: 2, Value: "z"}),
	}
	if porcupine.CheckOperations(Model, wrongValue) {
		t.Fatal("a value nobody wrote was accepted")
	}
}
