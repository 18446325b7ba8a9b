package main

import (
	"log/slog"
	"net/http"
	"time"
)

// serverTimeouts bound what one connection can make a server hold: the
// request head and body must arrive in time (a client that sends them
// slowly, with a valid token or not, cannot keep a connection and its
// buffers for ever), and an idle keep-alive connection is closed. There is
// no write timeout: the live streams (/api/live, live queries) stay open
// for as long as their clients read, and end at shutdown.
type serverTimeouts struct {
	head, body, idle time.Duration
}

// defaultTimeouts allow a large upload (an SSIM file of hundreds of
// megabytes) at a few MB/s.
var defaultTimeouts = serverTimeouts{head: 10 * time.Second, body: 5 * time.Minute, idle: 2 * time.Minute}

// newHTTPServer is the HTTP server of every logbook server command.
func newHTTPServer(h http.Handler, log *slog.Logger, t serverTimeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.head,
		ReadTimeout:       t.body,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
