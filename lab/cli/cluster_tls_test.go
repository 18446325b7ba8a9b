package cli

import (
	"strings"
	"testing"
)

// TestPlaintextHops: cluster --tls warns of a --store or --bus URL that
// asks for no verified TLS, and of no other, without showing the URL.
func TestPlaintextHops(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, c := range []struct {
		store, bus, pgsslmode string
		want                  []string
	}{
		{"postgres://u:pw-marker@db:5432/x?sslmode=verify-full", "kafka://k:9093/t?tls_ca=/dev/null", "", nil},
		{"postgres://db/x?sslmode=verify-ca", "kafka://k:9093/t?tls=true", "disable", nil},
		{"postgres://db/x", "", "verify-full", nil},
		{"postgres://u:pw-marker@db/x", "", "", []string{"sslmode=prefer"}},
		{"postgres://db/x?sslmode=disable", "", "verify-full", []string{"sslmode=disable"}},
		{"postgres://db/x?sslmode=require", "", "", []string{"sslmode=require"}},
		{"", "kafka://k:9092/t", "", []string{"--bus URL asks for no TLS"}},
		{"postgres://db/x?sslmode=allow", "kafka://k:9092/t?tls=false", "", []string{"sslmode=allow", "--bus URL asks for no TLS"}},
	} {
		got := plaintextHops(c.store, c.bus, env(c.pgsslmode))
		ok := len(got) == len(c.want)
		for i := range got {
			ok = ok && strings.Contains(got[i], c.want[i]) && !strings.Contains(got[i], "pw-marker") && !strings.Contains(got[i], "db/x")
		}
		if !ok {
			t.Errorf("store %q bus %q PGSSLMODE=%q: %q, want warnings saying %q", c.store, c.bus, c.pgsslmode, got, c.want)
		}
	}
}
