package main

import "github.com/logbook/logbook/internal/cliutil"

// tuneProcs gives a process that answers window queries beside a live
// ingest spare Go processors (cliutil.TuneProcs).
func tuneProcs() { cliutil.TuneProcs() }
