package cluster

import (
	"regexp"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/query"
	"github.com/logbook/logbook/services/flights/httpapi"
)

// TestProxyRoutes: the routing nginx gets from the route tables sends
// each kind of request where it belongs. (nginx's PCRE and Go's regexp
// agree on these expressions: anchors, [^/]+ and named groups.)
func TestProxyRoutes(t *testing.T) {
	aff, replicas := proxyRoutes(append(httpkit.Specs(httpapi.Routes), query.Route))
	key := func(uri string) string {
		for _, a := range aff {
			re := regexp.MustCompile(strings.ReplaceAll(a.Regexp, "(?<", "(?P<"))
			if m := re.FindStringSubmatch(uri); m != nil {
				if a.Key == "$id" {
					return m[re.SubexpIndex("id")]
				}
				return a.Key
			}
		}
		return "random"
	}
	pool := func(method, uri string) string {
		for _, r := range replicas {
			if regexp.MustCompile("^" + r).MatchString(method + " " + uri) {
				return "replicas"
			}
		}
		return "writers"
	}
	for _, c := range []struct{ method, uri, pool, key string }{
		{"POST", "/api/rotations", "writers", "random"},
		{"POST", "/api/rotations/R1/legs", "writers", "R1"},
		{"PATCH", "/api/rotations/R1/legs/L9", "writers", "R1"},
		{"GET", "/api/rotations/R1", "writers", "R1"},
		{"PUT", "/api/airplanes/D-ABCD/rotation", "writers", "D-ABCD"},
		{"GET", "/api/airports/FRA", "writers", "FRA"},
		{"POST", "/api/imports", "writers", "pinned"},
		{"GET", "/api/imports/abc", "writers", "pinned"},
		{"GET", "/api/rotations/R1/violations", "replicas", ""},
		{"GET", "/api/violations", "replicas", ""},
		{"GET", "/api/checks/continuity", "replicas", ""},
		{"GET", "/api/board/legs", "replicas", ""},
		{"GET", "/api/live", "replicas", ""},
		{"GET", "/api/validation/digest", "replicas", ""},
		{"GET", "/queries/events/by-tag", "replicas", ""},
		{"GET", "/api/session", "writers", "random"},
		{"POST", "/api/violations", "writers", "random"},
	} {
		if got := pool(c.method, c.uri); got != c.pool {
			t.Errorf("%s %s goes to %s, want %s", c.method, c.uri, got, c.pool)
		}
		if c.key != "" {
			if got := key(c.uri); got != c.key {
				t.Errorf("%s %s hashes on %q, want %q", c.method, c.uri, got, c.key)
			}
		}
	}
}
