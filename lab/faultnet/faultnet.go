// Package faultnet is a fault-injecting TCP proxy for the fault tests of a
// cluster: put one between a node and PostgreSQL, Kafka or the node's HTTP
// port, point the node at Addr, and cut, refuse, reset or slow the
// connections that pass through it.
//
// The faults, and what each one models:
//
//   - Cut: a network partition. Connections stay open but no byte passes in
//     either direction; new connections are accepted (the client sees a
//     connected socket) but reach nothing — they are dialled upstream at
//     the heal, and dropped if their client closes first. Nothing is
//     dropped: the bytes wait, as TCP retransmits them, and flow again after
//     Heal — so a client waits for its own timeouts, exactly as it would
//     behind a partition shorter than TCP's retransmission limit.
//   - Refuse: the far side is down. The listening socket is closed, so new
//     connections are refused by the kernel; the existing ones are closed.
//   - Reset: a connection reset. Every current connection is closed with a
//     TCP RST (SO_LINGER 0) on both sides; new connections pass.
//   - Latency: a slow link. Every byte from the upstream reaches the client
//     d later than it arrived, so every request-answer round trip takes at
//     least d longer (throughput is not capped: the bytes are delayed, not
//     serialised).
//   - Heal ends them all.
//
// What it cannot model: anything below TCP — packet loss, reordering,
// duplication, one-way partitions that TCP itself would notice — needs
// `tc netem` or iptables, and this machine has neither the netem kernel
// module nor iptables; a proxy sees a byte stream, not packets.
package faultnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the largest read a link makes; chunkQueue is how many read
// chunks a direction may hold while they wait out a latency or a cut.
// Together they bound the memory of one connection (2 × (chunkQueue+1) ×
// chunkSize).
const (
	chunkSize  = 16 << 10
	chunkQueue = 8
)

// DialTimeout bounds the proxy's connection to its upstream.
const DialTimeout = 5 * time.Second

// DefaultMaxConns is how many connections a proxy holds at once unless
// SetMaxConns says otherwise; one beyond is reset at once.
const DefaultMaxConns = 4096

// ErrClosed is what the fault methods return after Close.
var ErrClosed = errors.New("faultnet: proxy closed")

// Stats are a proxy's counters since Listen.
type Stats struct {
	Accepted   int64 // client connections accepted
	Active     int64 // client connections open now
	Held       int64 // accepted under a cut and not yet connected upstream
	Dialed     int64 // upstream connections made
	DialErrors int64 // upstream dials that failed (the client was reset)
	Resets     int64 // connections closed with RST by Reset
	Closed     int64 // connections closed by Refuse or Close
	BytesUp    int64 // bytes written to the upstream
	BytesDown  int64 // bytes written to the clients
	Cuts       int64 // calls of Cut
	Refusals   int64 // calls of Refuse
	OverLimit  int64 // connections reset at accept because MaxConns were open
}

// Proxy is one listening address forwarding to one upstream. Its methods are
// safe for concurrent use.
type Proxy struct {
	upstream string
	addr     string

	mu       sync.Mutex
	ln       net.Listener // nil while refusing
	flow     chan struct{}
	cut      bool
	latency  time.Duration
	links    map[*link]struct{}
	maxConns int
	closed   bool
	accepts  sync.WaitGroup
	handlers sync.WaitGroup

	accepted, held, dialed, dialErrors, resets, closedN atomic.Int64
	bytesUp, bytesDown, cuts, refusals, overLimit       atomic.Int64
}

// Listen starts a proxy to upstream (host:port) on a free port of 127.0.0.1.
func Listen(upstream string) (*Proxy, error) {
	return ListenOn("127.0.0.1:0", upstream)
}

// ListenOn starts a proxy to upstream on the address addr.
func ListenOn(addr, upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("faultnet: upstream %q: %w", upstream, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen: %w", err)
	}
	flow := make(chan struct{})
	close(flow)
	p := &Proxy{
		upstream: upstream,
		addr:     ln.Addr().String(),
		ln:       ln,
		flow:     flow,
		links:    map[*link]struct{}{},
		maxConns: DefaultMaxConns,
	}
	p.accepts.Add(1)
	go p.acceptLoop(ln)
	return p, nil
}

// Addr is the proxy's address (host:port), the one to give the client.
func (p *Proxy) Addr() string { return p.addr }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// SetMaxConns bounds the connections the proxy holds at once (each is two
// sockets, goroutines and up to a few hundred KiB of buffers); a connection
// beyond is reset as soon as it is accepted. n <= 0 restores the default.
func (p *Proxy) SetMaxConns(n int) {
	if n <= 0 {
		n = DefaultMaxConns
	}
	p.mu.Lock()
	p.maxConns = n
	p.mu.Unlock()
}

// Cut partitions the link: no byte passes in either direction, on open
// connections or on new ones, until Heal. Nothing is dropped.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.cut {
		p.cut = true
		p.flow = make(chan struct{})
	}
	p.cuts.Add(1)
	return nil
}

// Refuse closes the listening socket, so that new connections are refused,
// and closes every open connection. Heal listens again on the same address.
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.refusals.Add(1)
	ln := p.ln
	p.ln = nil
	links := p.takeLinks()
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, l := range links {
		l.close(false)
		p.closedN.Add(1)
	}
	return nil
}

// Reset closes every open connection with a TCP RST on both sides; new
// connections are served as before.
func (p *Proxy) Reset() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	links := p.takeLinks()
	p.mu.Unlock()
	for _, l := range links {
		l.close(true)
		p.resets.Add(1)
	}
	return nil
}

// Latency delays every byte from the upstream by d on its way to the client
// (0 removes the delay). It applies to bytes read from now on.
func (p *Proxy) Latency(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("faultnet: negative latency %v", d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.latency = d
	return nil
}

// Heal ends every fault: a cut's held bytes and connections flow on, a
// refusing proxy listens again on its address, the latency is removed.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.cut {
		p.cut = false
		close(p.flow)
	}
	p.latency = 0
	if p.ln == nil {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("faultnet: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.accepts.Add(1)
		go p.acceptLoop(ln)
	}
	return nil
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ln := p.ln
	p.ln = nil
	links := p.takeLinks()
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.accepts.Wait()
	for _, l := range links {
		l.close(false)
		p.closedN.Add(1)
	}
	p.handlers.Wait()
	return nil
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := int64(len(p.links))
	p.mu.Unlock()
	return Stats{
		Accepted:   p.accepted.Load(),
		Active:     active,
		Held:       p.held.Load(),
		Dialed:     p.dialed.Load(),
		DialErrors: p.dialErrors.Load(),
		Resets:     p.resets.Load(),
		Closed:     p.closedN.Load(),
		BytesUp:    p.bytesUp.Load(),
		BytesDown:  p.bytesDown.Load(),
		Cuts:       p.cuts.Load(),
		Refusals:   p.refusals.Load(),
		OverLimit:  p.overLimit.Load(),
	}
}

// takeLinks empties the link set; p.mu is held.
func (p *Proxy) takeLinks() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	clear(p.links)
	return links
}

func (p *Proxy) acceptLoop(ln net.Listener) {
	defer p.accepts.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed by Refuse or Close
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed || p.ln != ln {
			p.mu.Unlock()
			c.Close()
			return
		}
		if len(p.links) >= p.maxConns {
			p.mu.Unlock()
			p.overLimit.Add(1)
			l.close(true)
			continue
		}
		p.links[l] = struct{}{}
		p.handlers.Add(1)
		p.mu.Unlock()
		p.accepted.Add(1)
		go p.serve(l)
	}
}

// gate returns when bytes may flow (true) or when the link is closed (false).
func (p *Proxy) gate(l *link) bool {
	p.mu.Lock()
	flow := p.flow
	p.mu.Unlock()
	select {
	case <-flow:
		return true
	case <-l.done:
		return false
	}
}

func (p *Proxy) currentLatency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

func (p *Proxy) serve(l *link) {
	defer p.handlers.Done()
	defer p.forget(l)
	// A connection accepted under a cut reaches the upstream only after Heal,
	// as a connection attempt across a partition would.
	p.held.Add(1)
	pending, ok := p.hold(l)
	p.held.Add(-1)
	if !ok {
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, DialTimeout)
	if err != nil {
		p.dialErrors.Add(1)
		l.close(true)
		return
	}
	p.dialed.Add(1)
	if !l.setUpstream(up) {
		up.Close()
		return
	}
	if len(pending) > 0 {
		n, err := up.Write(pending)
		p.bytesUp.Add(int64(n))
		if err != nil {
			l.close(false)
			return
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, l.client, up, &p.bytesUp, false) }()
	go func() { defer wg.Done(); p.pipe(l, up, l.client, &p.bytesDown, true) }()
	wg.Wait()
	l.close(false)
}

// holdPoll is how often a connection held by a cut checks whether its
// client is still there.
const holdPoll = 100 * time.Millisecond

// hold waits until bytes may flow, for a connection not yet dialled
// upstream. Meanwhile it reads what the client sends (up to one chunk,
// returned as pending), so that a client that gives up and closes is
// noticed and its connection dropped: clients retrying through a long cut
// do not pile up connections that would all be dialled at the heal.
func (p *Proxy) hold(l *link) (pending []byte, ok bool) {
	buf := make([]byte, chunkSize)
	n := 0
	defer l.client.SetReadDeadline(time.Time{})
	for {
		p.mu.Lock()
		flow := p.flow
		p.mu.Unlock()
		select {
		case <-flow:
			return buf[:n], true
		case <-l.done:
			return nil, false
		default:
		}
		if n == len(buf) {
			if !p.gate(l) {
				return nil, false
			}
			continue
		}
		l.client.SetReadDeadline(time.Now().Add(holdPoll))
		m, err := l.client.Read(buf[n:])
		n += m
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			l.close(false) // the client left (or half-closed) before the heal
			return nil, false
		}
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, through the proxy's faults: a reader that waits out
// a cut before each read, and a writer that waits out a cut and the latency
// before each write. When src ends the writer half-closes dst.
func (p *Proxy) pipe(l *link, src, dst net.Conn, count *atomic.Int64, delayed bool) {
	q := make(chan chunk, chunkQueue)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for c := range q {
			if !p.gate(l) {
				return
			}
			if wait := time.Until(c.due); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-l.done:
					t.Stop()
					return
				}
				// A cut may have begun while the chunk waited.
				if !p.gate(l) {
					return
				}
			}
			n, err := dst.Write(c.b)
			count.Add(int64(n))
			if err != nil {
				l.close(false)
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	defer func() { <-writerDone }()
	defer close(q)
	for {
		if !p.gate(l) {
			return
		}
		b := make([]byte, chunkSize)
		n, err := src.Read(b)
		if n > 0 {
			c := chunk{b: b[:n]}
			if delayed {
				if d := p.currentLatency(); d > 0 {
					c.due = time.Now().Add(d)
				}
			}
			select {
			case q <- c:
			case <-l.done:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.close(false)
			}
			return
		}
	}
}

// link is one client connection and, once dialled, its upstream connection.
type link struct {
	client net.Conn
	mu     sync.Mutex
	up     net.Conn
	closed bool
	done   chan struct{}
}

func (l *link) setUpstream(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.up = up
	return true
}

// close closes both connections once; with rst, with a TCP RST.
func (l *link) close(rst bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	for _, c := range []net.Conn{l.client, l.up} {
		if c == nil {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok && rst {
			tc.SetLinger(0)
		}
		c.Close()
	}
}
