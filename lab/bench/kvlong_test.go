package bench

import (
	"strings"
	"testing"
)

// A backend that cannot hold the fill is refused with the reason, before
// anything is put: etcd above half its quota, the repository on
// Cassandra above what one partition holds, and any backend above the
// disk under --data.
func TestKVLongRefusesWhatABackendCannotHold(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		backend string
		size    int64
		want    string // "" if it fits
	}{
		{"etcd", 1e9, ""},
		{"etcd", 20e9, "quota"},
		{"cassandra", 1e9, ""},
		{"cassandra", 20e9, "one partition"},
		{"cassandra", 1.5e9, ""},
		{"postgres", 1e6, ""},
		{"postgres", 1e18, "free under"},
		{"cassandra-blobs", 1e18, "free under"},
	} {
		err := canHold(KVLongConfig{KVConfig: KVConfig{DataDir: dir}, Size: c.size}, c.backend)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s, %d bytes: refused: %v", c.backend, c.size, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s, %d bytes: %v, want a refusal saying %q", c.backend, c.size, err, c.want)
		}
	}
}
