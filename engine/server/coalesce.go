package server

import (
	"net"
	"sync"
	"time"
)

// coalescingListener hands out connections whose answers to pipelined
// requests leave in one write: net/http writes each answer to the socket
// as soon as its handler returns (one system call per request, a large
// share of a server's CPU under pipelined load), even when the next
// requests of the same connection are already read and waiting. A
// coalescing connection keeps what the server writes and sends it when
// the server next reads the socket for more requests — that is, when the
// requests it had are answered — so a batch of pipelined requests costs
// one read and one write. A client that sends one request at a time sees
// no difference: the server reads again right after answering.
//
// net/http also reads one byte in the background while a handler runs
// (to notice a client that went away); those reads do not flush, or every
// answer would again leave on its own. So that an answer never waits long
// behind a slow handler of a later pipelined request, what is kept is
// flushed after coalesceDelay at the latest. Not for handlers that stream
// (they flush to get their data out; it would wait up to coalesceDelay).
type coalescingListener struct{ net.Listener }

// coalesceDelay bounds how long an answer is kept; coalesceMax how much.
const (
	coalesceDelay = time.Millisecond
	coalesceMax   = 64 << 10
)

func (l coalescingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &coalescingConn{Conn: c}
	cc.timer = time.AfterFunc(time.Hour, cc.timedFlush)
	cc.timer.Stop()
	return cc, nil
}

type coalescingConn struct {
	net.Conn
	mu    sync.Mutex
	buf   []byte
	err   error // of the last flush; later writes fail with it
	timer *time.Timer
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.buf)+len(p) > coalesceMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > coalesceMax {
			return c.Conn.Write(p)
		}
	}
	if len(c.buf) == 0 {
		c.timer.Reset(coalesceDelay)
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// Read sends what is kept first, unless it is net/http's one-byte
// background read.
func (c *coalescingConn) Read(p []byte) (int, error) {
	if len(p) > 1 {
		c.mu.Lock()
		err := c.flushLocked()
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(p)
}

func (c *coalescingConn) timedFlush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.flushLocked()
}

func (c *coalescingConn) flushLocked() error {
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	c.timer.Stop()
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	if cap(c.buf) > coalesceMax {
		c.buf = nil
	}
	c.err = err
	return err
}

// Close sends what is kept, but waits for a peer that stopped reading no
// longer than closeFlushWait: a flush in progress holds mu, and the
// server's Shutdown calls Close for idle connections while holding its
// own lock, so an unbounded wait here would hang the whole shutdown.
func (c *coalescingConn) Close() error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushWait))
	c.mu.Lock()
	_ = c.flushLocked()
	c.mu.Unlock()
	return c.Conn.Close()
}

// closeFlushWait bounds how long Close waits to send what is kept.
const closeFlushWait = 100 * time.Millisecond
