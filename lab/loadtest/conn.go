package loadtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Conn is one HTTP/1.1 connection that a single goroutine uses for one
// request at a time: the request leaves in one write, the answer is read
// in the caller's goroutine. For a closed workload in which each
// simulated user waits for every answer (the write load test's planners)
// it does what the pipelining Client does with one request in flight,
// without handing each request to a writer and a reader goroutine: on
// two cores shared with the server, that hand-off was a third of the
// generator's CPU. Not safe for concurrent use.
type Conn struct {
	addr, host, auth string
	tls              *tls.Config // nil: plain http
	c                net.Conn
	br               *bufio.Reader
	wbuf             []byte
	res              fasthttp.Response
}

// NewConn returns a connection to c's server with c's token and TLS
// configuration; it dials on its first request.
func (c *Client) NewConn() (*Conn, error) {
	var cfg *tls.Config
	if c.tls != nil {
		cfg = c.tls.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(c.pc.Addr)
			if err != nil {
				return nil, fmt.Errorf("loadtest: %w", err)
			}
			cfg.ServerName = host
		}
	}
	return &Conn{addr: c.pc.Addr, host: c.pc.Addr, auth: c.auth, tls: cfg}, nil
}

// dial connects, with a TLS handshake over https.
func (k *Conn) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", k.addr)
	if err != nil {
		return err
	}
	if k.tls != nil {
		tc := tls.Client(c, k.tls)
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.Close()
			return err
		}
		c = tc
	}
	k.c, k.br = c, bufio.NewReaderSize(c, 16<<10)
	return nil
}

// Do sends one request and reads the whole answer, as Client.Do does. A
// connection that fails is closed and dialled again on the next request.
func (k *Conn) Do(ctx context.Context, method, path, body string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	status, data, err := k.do(ctx, method, path, body)
	if err != nil {
		k.Close()
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status >= 400 {
		return status, data, fmt.Errorf("%s %s: %d %s", method, path, status, strings.TrimSpace(string(data)))
	}
	return status, data, nil
}

func (k *Conn) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	if k.c == nil {
		if err := k.dial(ctx); err != nil {
			return 0, nil, err
		}
	}
	if err := k.c.SetDeadline(time.Now().Add(requestTimeout)); err != nil {
		return 0, nil, err
	}
	b := k.wbuf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, k.host...)
	b = append(b, "\r\nAuthorization: "...)
	b = append(b, k.auth...)
	if body != "" {
		b = append(b, "\r\nContent-Type: application/json"...)
	}
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	k.wbuf = b
	if _, err := k.c.Write(b); err != nil {
		return 0, nil, err
	}
	k.res.Reset()
	if err := k.res.Read(k.br); err != nil {
		return 0, nil, err
	}
	data := append([]byte(nil), k.res.Body()...)
	status := k.res.StatusCode()
	if k.res.ConnectionClose() {
		k.Close()
	}
	return status, data, nil
}

// Close closes the connection (the next request dials again).
func (k *Conn) Close() {
	if k.c != nil {
		_ = k.c.Close()
		k.c, k.br = nil, nil
	}
}
