package loadtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// pipeline sends requests over a few pipelined HTTP/1.1 connections with
// few goroutines: the caller (the arrival loop) encodes each request into
// a connection's write buffer and flushes the buffers when a batch is old
// enough, and one goroutine per connection reads the answers in order and
// calls each request's done function. No goroutine per request, one write
// system call per batch, one read per burst of answers: per request the
// generator costs a few microseconds of CPU, so on a machine it shares
// with the server most of the CPU goes to the server it measures.
//
// The price is head-of-line blocking: a connection's answers come in the
// order of its requests, and the server answers a connection's requests
// one after the other, so an answer waits for every slower answer sent
// before it on its connection. That is negligible when every request
// takes microseconds (nodes unlimited), and the reason the tickets
// experiment sends one request per connection when nodes are throttled.
//
// Not safe for concurrent use: one goroutine sends and flushes.
type pipeline struct {
	addr, host, auth string
	batchDelay       time.Duration
	conns            []*pipeConn
	inflight         atomic.Int64 // requests sent and not yet answered
	dirty            []*pipeConn  // connections with unflushed requests
	oldest           time.Time    // when the oldest unflushed request was due
}

// pipeReq is a request written and waiting for its answer.
type pipeReq struct {
	done func(status int, err error)
}

type pipeConn struct {
	p       *pipeline
	c       net.Conn
	bw      *bufio.Writer
	mu      sync.Mutex   // orders sends to pending with shutting it
	dead    atomic.Bool  // set under mu; then pending is closed
	pending chan pipeReq // written, in order, not yet answered
	n       atomic.Int64 // len(pending), read without the lock
	stopped chan struct{}
}

// pipeDepth bounds the requests outstanding on one connection.
const pipeDepth = 1 << 14

func newPipeline(addr, token string, conns int, batchDelay time.Duration) (*pipeline, error) {
	p := &pipeline{addr: addr, host: addr, auth: "Bearer " + token, batchDelay: batchDelay}
	for range max(1, conns) {
		pc, err := p.dial()
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns = append(p.conns, pc)
	}
	return p, nil
}

func (p *pipeline) dial() (*pipeConn, error) {
	c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	pc := &pipeConn{p: p, c: c, bw: bufio.NewWriterSize(c, 64<<10), pending: make(chan pipeReq, pipeDepth), stopped: make(chan struct{})}
	go pc.readLoop()
	return pc, nil
}

// send writes a request, due at due, into the buffer of the connection
// with the fewest requests outstanding; done is called with its answer's
// status, from that connection's reading goroutine. It flushes when the
// oldest request buffered has waited batchDelay.
func (p *pipeline) send(due time.Time, method, path, body string, done func(status int, err error)) {
	var pc *pipeConn
	for i, c := range p.conns {
		if c.dead.Load() {
			nc, err := p.dial()
			if err != nil {
				continue
			}
			p.conns[i], c = nc, nc
		}
		if pc == nil || c.n.Load() < pc.n.Load() {
			pc = c
		}
	}
	if pc == nil {
		done(0, fmt.Errorf("%s %s: no connection to %s", method, path, p.addr))
		return
	}
	pc.mu.Lock()
	if pc.dead.Load() || pc.n.Load() >= pipeDepth {
		pc.mu.Unlock()
		done(0, fmt.Errorf("%s %s: connection lost or full", method, path))
		return
	}
	p.inflight.Add(1)
	pc.n.Add(1)
	pc.pending <- pipeReq{done: done}
	pc.mu.Unlock()
	bw := pc.bw
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(p.host)
	bw.WriteString("\r\nAuthorization: ")
	bw.WriteString(p.auth)
	if body != "" {
		bw.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
		var num [20]byte
		bw.Write(strconv.AppendInt(num[:0], int64(len(body)), 10))
		bw.WriteString("\r\n\r\n")
		bw.WriteString(body)
	} else {
		bw.WriteString("\r\n\r\n")
	}
	if len(p.dirty) == 0 {
		p.oldest = due
	}
	if !pc.inDirty(p.dirty) {
		p.dirty = append(p.dirty, pc)
	}
	p.flushIfDue(time.Now())
}

func (pc *pipeConn) inDirty(d []*pipeConn) bool {
	for _, c := range d {
		if c == pc {
			return true
		}
	}
	return false
}

// shut marks the connection dead and closes it; nothing is sent on it
// afterwards.
func (pc *pipeConn) shut() {
	pc.mu.Lock()
	if !pc.dead.Load() {
		pc.dead.Store(true)
		close(pc.pending)
	}
	pc.mu.Unlock()
	pc.c.Close()
}

// flushIfDue flushes the buffered requests if the oldest has waited
// batchDelay by now.
func (p *pipeline) flushIfDue(now time.Time) {
	if len(p.dirty) > 0 && now.Sub(p.oldest) >= p.batchDelay {
		p.flush()
	}
}

// until is how long the caller may sleep before the buffered requests
// must be flushed (0: flush now; no limit if none is buffered).
func (p *pipeline) until(now time.Time) (time.Duration, bool) {
	if len(p.dirty) == 0 {
		return 0, false
	}
	return max(0, p.oldest.Add(p.batchDelay).Sub(now)), true
}

// flush writes every buffered request. A connection whose write fails is
// closed; its reading goroutine then fails what it had outstanding.
func (p *pipeline) flush() {
	for _, pc := range p.dirty {
		_ = pc.c.SetWriteDeadline(time.Now().Add(requestTimeout))
		if err := pc.bw.Flush(); err != nil {
			pc.shut()
			pc.bw.Reset(pc.c)
		}
	}
	p.dirty = p.dirty[:0]
}

// readLoop reads the connection's answers in order until it fails or is
// closed, then fails the requests still outstanding.
func (pc *pipeConn) readLoop() {
	defer close(pc.stopped)
	br := bufio.NewReaderSize(pc.c, 64<<10)
	var res fasthttp.Response
	var deadline time.Time
	var err error
	for err == nil {
		req, ok := <-pc.pending
		if !ok {
			return
		}
		// The read deadline bounds a request; renewing it costs, so it
		// is renewed at most once a second.
		if now := time.Now(); deadline.Sub(now) < requestTimeout-time.Second {
			deadline = now.Add(requestTimeout)
			_ = pc.c.SetReadDeadline(deadline)
		}
		res.Reset()
		if err = res.Read(br); err != nil {
			pc.answer(req, 0, err)
			break
		}
		pc.answer(req, res.StatusCode(), nil)
		if res.ConnectionClose() {
			err = errors.New("the server closed the connection")
		}
	}
	pc.shut()
	for req := range pc.pending {
		pc.answer(req, 0, fmt.Errorf("connection failed: %w", err))
	}
}

func (pc *pipeConn) answer(req pipeReq, status int, err error) {
	pc.n.Add(-1)
	pc.p.inflight.Add(-1)
	req.done(status, err)
}

// close closes every connection and waits for their reading goroutines
// (which fail whatever is still outstanding).
func (p *pipeline) close() {
	for _, pc := range p.conns {
		pc.shut()
	}
	for _, pc := range p.conns {
		<-pc.stopped
	}
}
