package main

import (
	"flag"
	"fmt"

	"github.com/logbook/logbook/eventstore"
	"github.com/logbook/logbook/eventstore/pebblestore"
)

// storeFlags are the flags of every command that opens a store.
type storeFlags struct {
	data string
}

func (f *storeFlags) register(fs *flag.FlagSet, defaultDir string) {
	fs.StringVar(&f.data, "data", defaultDir, "directory of the embedded store")
}

// openedStore is a store plus what only some backends can tell.
type openedStore struct {
	eventstore.Store
	fsyncs func() uint64 // nil when the backend cannot count
}

func (f *storeFlags) open() (*openedStore, error) {
	if f.data == "" {
		return nil, usageError{"--data must name a directory"}
	}
	s, err := pebblestore.Open(f.data, pebblestore.Options{})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &openedStore{Store: s, fsyncs: s.Fsyncs}, nil
}
