package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/logbook/logbook/engine/auth"
)

// debugWriteTimeout bounds a profile's or a trace's length: pprof refuses
// one longer than the server's write timeout.
const debugWriteTimeout = 2 * time.Minute

// startDebug serves Go's pprof profiles on addr, to a token of any role:
// a profile tells much about the process, and a CPU profile or trace
// costs it. It returns the function that stops the debug server.
func startDebug(addr string, tokens *auth.Tokens, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listener: %w", err)
	}
	dbg := http.NewServeMux()
	dbg.HandleFunc("/debug/pprof/", pprof.Index)
	dbg.HandleFunc("/debug/pprof/profile", pprof.Profile)
	dbg.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := NewHTTPServer(tokens.RequireRole(auth.Viewer, dbg), log, DefaultTimeouts)
	srv.WriteTimeout = debugWriteTimeout
	log.Info("pprof serving", "url", listenAddr(ln)+"/debug/pprof/")
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("debug server", "err", err)
		}
	}()
	return func() { srv.Close() }, nil
}
