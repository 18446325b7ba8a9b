package server

import (
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Timeouts bound what one connection can make a server hold: the request
// head and body must arrive in time (a client that sends them slowly,
// with a valid token or not, cannot keep a connection and its buffers for
// ever), and an idle keep-alive connection is closed. There is no write
// timeout: live streams stay open for as long as their clients read, and
// end at shutdown. A zero field takes its value from DefaultTimeouts.
type Timeouts struct {
	// Header bounds the time to read a request's head.
	Header time.Duration
	// Body bounds the time to read a whole request, body included.
	Body time.Duration
	// Idle closes a keep-alive connection that sends no request for this
	// long.
	Idle time.Duration
	// Shutdown bounds the graceful shutdown: requests still running
	// after it are cut off.
	Shutdown time.Duration
}

// DefaultTimeouts allow a large upload (an SSIM file of hundreds of
// megabytes) at a few MB/s.
var DefaultTimeouts = Timeouts{Header: 10 * time.Second, Body: 5 * time.Minute, Idle: 2 * time.Minute, Shutdown: 10 * time.Second}

// orDefault fills the zero fields of t from DefaultTimeouts.
func (t Timeouts) orDefault() Timeouts {
	d := DefaultTimeouts
	if t.Header > 0 {
		d.Header = t.Header
	}
	if t.Body > 0 {
		d.Body = t.Body
	}
	if t.Idle > 0 {
		d.Idle = t.Idle
	}
	if t.Shutdown > 0 {
		d.Shutdown = t.Shutdown
	}
	return d
}

// NewHTTPServer is the HTTP server of every logbook server: its handler,
// its timeouts (zero fields from DefaultTimeouts), its header cap, and
// its errors to log at Warn.
func NewHTTPServer(h http.Handler, log *slog.Logger, t Timeouts) *http.Server {
	t = t.orDefault()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Body,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// DefaultMaxConns is a server's connection cap: far above what a load
// test opens (hundreds), far below the file descriptors a process
// usually gets (tens of thousands; an embedded store needs its share).
const DefaultMaxConns = 8192

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
