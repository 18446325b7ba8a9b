package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
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

// defaultMaxConns is a server's connection cap: far above what a load
// test opens (hundreds), far below the file descriptors a process gets
// here (20,000; Pebble needs its share).
const defaultMaxConns = 8192

// listen listens on addr and accepts at most maxConns connections at
// once. Beyond that a new connection is answered at once with a 503
// problem and closed, so that a client learns the server is full instead
// of waiting in the accept queue, and the server spends no descriptor or
// goroutine on it beyond the moment.
func listen(addr string, maxConns int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &cappedListener{Listener: ln, free: make(chan struct{}, maxConns)}, nil
}

type cappedListener struct {
	net.Listener
	free chan struct{} // one token per connection held
}

var fullAnswer = func() []byte {
	body := `{"type":"urn:logbook:problem:server-full","title":"Service Unavailable","status":503,"detail":"the server holds as many connections as it takes; try again later"}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.free <- struct{}{}:
			return &cappedConn{Conn: c, l: l}, nil
		default:
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Write(fullAnswer)
			_ = c.Close()
		}
	}
}

type cappedConn struct {
	net.Conn
	l    *cappedListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.l.free })
	return err
}

// serveUntil serves h on addr (capped at maxConns connections) until ctx
// ends, then shuts the server down gracefully, waiting up to 10 s. It logs
// msg with the URL and attrs once listening. onShutdown runs when the
// shutdown begins (to end what would hold it: queues, streams).
func serveUntil(ctx context.Context, log *slog.Logger, addr string, maxConns int, h http.Handler, msg string, attrs []any, onShutdown ...func()) error {
	ln, err := listen(addr, maxConns)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return serveOn(ctx, log, ln, h, msg, attrs, onShutdown...)
}

// serveOn is serveUntil on a listener.
func serveOn(ctx context.Context, log *slog.Logger, ln net.Listener, h http.Handler, msg string, attrs []any, onShutdown ...func()) error {
	srv := newHTTPServer(h, log, defaultTimeouts)
	for _, f := range onShutdown {
		srv.RegisterOnShutdown(f)
	}
	log.Info(msg, append([]any{"url", "http://" + ln.Addr().String()}, attrs...)...)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
