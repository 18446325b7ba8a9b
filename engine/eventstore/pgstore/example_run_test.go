package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
)

// TestExample runs Example's code against the test server, in a fresh
// schema, and checks what it prints.
func TestExample(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := shareLog(ctx, url, &out); err != nil {
		t.Fatal(err)
	}
	want := `append at a stale version: eventstore: version conflict on stream "order-42": expected version 1, actual version 2
order-42 #1 OrderPlaced {"total":"19.90"}
order-42 #2 OrderPaid {"via":"card"}
`
	if out.String() != want {
		t.Errorf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
