package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/httpfuzz"
)

// FuzzAPI sends the admin API arbitrary requests — method, path under
// /admin/api/ (where the servers mount it), query, body, as a viewer or
// an admin — over an embedded store of a few streams, with hooks that
// refuse unknown streams. Whatever the request:
// no panic, no 5xx but the 501 of an absent action, every error a
// problem+json document with its status, an answer within a second.
func FuzzAPI(f *testing.F) {
	s, err := pebblestore.Open(f.TempDir(), pebblestore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, id := range []string{"a", "a/b", "ab", "b", "big"} {
		if _, err := s.Append(ctx, id, eventstore.Any, []eventstore.NewEvent{{Type: "E", Data: []byte(`{"x":1}`)}, {Type: "B", Data: []byte{0xff, 0}}}); err != nil {
			f.Fatal(err)
		}
	}
	known := func(ctx context.Context, stream string) error {
		v, err := s.StreamVersion(ctx, stream)
		if err == nil && v == 0 {
			err = fmt.Errorf("%q: %w", stream, admin.ErrNoStream)
		}
		return err
	}
	h := admin.New(s, tokens(), admin.Options{
		Delete:   func(ctx context.Context, stream string, _ bool) error { return known(ctx, stream) },
		Truncate: func(ctx context.Context, stream string, _ uint64) error { return known(ctx, stream) },
	})
	// target: after /admin/api/
	for _, c := range []struct{ method, target, body string }{
		{"GET", "streams?prefix=a&limit=1", ""},
		{"GET", "streams?prefix=a&after=a&limit=500", ""},
		{"GET", "streams?limit=99999999999999999999", ""},
		{"GET", "streams/a%2Fb?from=2&limit=1", ""},
		{"GET", "streams/%00", ""},
		{"GET", "streams/a?from=18446744073709551615", ""},
		{"GET", "positions", ""},
		{"GET", "me", ""},
		{"DELETE", "streams/b?mode=hard", ""},
		{"DELETE", "streams/zz", ""},
		{"POST", "truncate", `{"stream":"a","before":2}`},
		{"POST", "truncate", `{"stream":"a","before":-1}`},
		{"POST", "forget", `{"subject":"s"}`},
		{"PUT", "streams/a", "x"},
	} {
		f.Add(c.method, c.target, []byte(c.body), true)
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte, asAdmin bool) {
		token := viewerToken
		if asAdmin {
			token = adminToken
		}
		req := httpfuzz.Request{Method: method, Target: "/admin/api/" + target, Header: http.Header{}, Body: body}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		httpfuzz.Do(t, h, req, time.Second, func(status int) bool { return status == http.StatusNotImplemented })
	})
}
