package pebbleformat

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func TestClaim(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := []byte("\x00format")
	if err := Claim(db, key, "kind-1", "store"); err != nil {
		t.Fatalf("claiming an empty database: %v", err)
	}
	if err := Claim(db, key, "kind-1", "store"); err != nil {
		t.Fatalf("reopening as the same kind: %v", err)
	}
	if err := Claim(db, key, "view-1", "view"); err == nil || !strings.Contains(err.Error(), `view format "kind-1"`) {
		t.Fatalf("opening as another kind: %v", err)
	}
	other := []byte("\x01other-marker")
	if err := Claim(db, other, "x", "view"); err == nil || !strings.Contains(err.Error(), "not a logbook view") {
		t.Fatalf("a database with data but no marker: %v", err)
	}
}
