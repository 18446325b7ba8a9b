package nemesis

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
)

// skipper is the planted bug "skip-event": a proxy between the HTTP-fed
// replica and the node it follows that passes everything but, in the
// stream of the log's events, replaces one event in skipEvery with a
// line saying it was removed — the replica skips it, as one with a bug
// in its feed would, and its view no longer equals the store's. Only the
// test that the checks catch such a replica uses it.
type skipper struct {
	URL    string
	target atomic.Pointer[url.URL] // set before the replica starts
	srv    *http.Server
}

const skipEvery = 50

func startSkipper() (*skipper, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &skipper{URL: "http://" + l.Addr().String()}
	rp := &httputil.ReverseProxy{
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // the followed node's kills are expected
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(p.target.Load()) },
		ModifyResponse: func(res *http.Response) error {
			if strings.HasPrefix(res.Request.URL.Path, "/queries/all") {
				res.Body = skipLines(res.Body)
			}
			return nil
		},
	}
	p.srv = &http.Server{Handler: rp}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *skipper) Close() { _ = p.srv.Close() }

// follow points the proxy at the node the replica follows.
func (p *skipper) follow(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	p.target.Store(u)
	return nil
}

// skipLines rewrites an NDJSON stream of events, line by line.
func skipLines(body io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer body.Close()
		r := bufio.NewReaderSize(body, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var ev struct {
					Position uint64 `json:"position"`
					Type     string `json:"type"`
				}
				if json.Unmarshal(bytes.TrimSpace(line), &ev) == nil && ev.Type == "LegsAdded" && ev.Position%skipEvery == 0 {
					line = fmt.Appendf(nil, "{\"removed_through\":%d}\n", ev.Position)
				}
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}
