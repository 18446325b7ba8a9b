package eventstore

import (
	"bytes"
	"testing"
)

// TestNewID: ids are unique, carry the version 7 layout, and their time
// prefix never goes backwards, so they reach an index in rough order.
func TestNewID(t *testing.T) {
	seen := make(map[ID]bool)
	var prev ID
	for i := range 10000 {
		id := NewID()
		if seen[id] {
			t.Fatalf("id %s twice", id)
		}
		seen[id] = true
		if id[6]>>4 != 7 || id[8]>>6 != 2 {
			t.Fatalf("id %s: version %d variant %d, want 7 and 2", id, id[6]>>4, id[8]>>6)
		}
		if i > 0 && bytes.Compare(id[:6], prev[:6]) < 0 {
			t.Fatalf("time prefix went back: %s after %s", id, prev)
		}
		prev = id
	}
}
