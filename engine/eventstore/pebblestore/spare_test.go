package pebblestore_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/pebblekit"
)

// TestLogsFromSpares: a store that writes more than a sixteenth of a log
// gets its later logs from spares (pebblekit.SpareWALs), files of the
// spare's size, and reads every event back after a reopen. With NoSync it
// makes no spare.
func TestLogsFromSpares(t *testing.T) {
	const memTable = 256 << 10
	for _, noSync := range []bool{false, true} {
		dir := t.TempDir()
		s, err := pebblestore.Open(dir, pebblestore.Options{MemTableBytes: memTable, NoSync: noSync, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("x"), 500)
		const appends, per = 60, 100
		for range appends {
			batch := make([]eventstore.NewEvent, per)
			for i := range batch {
				batch[i] = eventstore.NewEvent{Type: "E", Data: data}
			}
			if _, err := s.Append(t.Context(), "s", eventstore.Any, batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		spareSized := 0
		names, _ := os.ReadDir(dir)
		for _, e := range names {
			fi, _ := e.Info()
			if (strings.HasSuffix(e.Name(), ".log") || e.Name() == pebblekit.SpareName) && fi.Size() == pebblekit.WALBytes(memTable) {
				spareSized++
			}
			if strings.HasSuffix(e.Name(), ".tmp") {
				t.Errorf("a half-written spare after Close: %s", e.Name())
			}
		}
		if !noSync && spareSized < 2 {
			t.Errorf("%d logs or spares of the spare's size after 3 MB of appends, want several", spareSized)
		}
		if noSync && spareSized != 0 {
			t.Errorf("NoSync: %d files of the spare's size, want none", spareSized)
		}
		s, err = pebblestore.Open(dir, pebblestore.Options{MemTableBytes: memTable, NoSync: noSync, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.ReadStream(t.Context(), "s", 1, appends*per+1)
		if err != nil || len(evs) != appends*per {
			t.Fatalf("read back %d events of %d: %v", len(evs), appends*per, err)
		}
		_ = s.Close()
	}
}
