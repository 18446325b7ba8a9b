package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/services/flights"
)

// TestDigestRoute: the API answers the view's digest once the view has
// reached min_position.
func TestDigestRoute(t *testing.T) {
	srv, svc := newAPI(t)
	res := expect(t, call(t, srv, plannerToken, "POST", "/api/rotations", `{"id":"r1"}`), http.StatusCreated)
	pos := res.header.Get("X-Logbook-Position")
	got := expect(t, call(t, srv, viewerToken, "GET", "/api/validation/digest?min_position="+pos, ""), http.StatusOK)
	want, wantPos := svc.Validation.Current().Digest()
	if got.body["digest"] != want || got.body["position"] != float64(wantPos) {
		t.Fatalf("digest answer %s, view %s at %d", got.raw, want, wantPos)
	}
	expect(t, call(t, srv, viewerToken, "GET", "/api/validation/digest?min_position=x", ""), http.StatusBadRequest)
}

// A retried keyed create whose key has left the ring is a conflict, not a
// server error.
func TestRetriedCreateAfterKeyForgottenIsConflict(t *testing.T) {
	srv, svc := newAPI(t)
	p := planner()
	r := expect(t, call(t, srv, p, "POST", "/api/rotations", "", "Idempotency-Key", "create-1"), 201)
	id := r.body["id"].(string)
	ctx := context.Background()
	for i := range svc.Rotations.Options().IdempotencyKeys {
		_, err := svc.Rotations.Execute(ctx, id, flights.AddLeg{Leg: leg(fmt.Sprint("l", i), "LH", i+1, "FRA", "FRA", i*120, 60)},
			aggregate.WithIdempotencyKey(fmt.Sprint("k", i)))
		if err != nil {
			t.Fatal(err)
		}
	}
	// The key has been forgotten; the derived id names an aggregate that
	// exists: 409, not a server error.
	expect(t, call(t, srv, p, "POST", "/api/rotations", "", "Idempotency-Key", "create-1"), 409)
}

func TestOversizedBulkIs413(t *testing.T) {
	srv, _ := newAPI(t)
	p := planner()
	expect(t, call(t, srv, p, "POST", "/api/rotations", `{"id":"r1"}`), 201)
	var b strings.Builder
	b.WriteString(`{"legs":[`)
	for i := range 6000 {
		if i > 0 {
			b.WriteString(",")
		}
		dep := base.Add(time.Duration(i) * 2 * time.Hour)
		fmt.Fprintf(&b, `{"airline":"LH","number":%d,"origin":"FRA","destination":"FRA","departure":%q,"arrival":%q}`,
			i%9999+1, dep.Format(time.RFC3339), dep.Add(time.Hour).Format(time.RFC3339))
	}
	b.WriteString(`]}`)
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs/bulk", b.String()), 413)
	// Nothing was written, and the rotation still takes commands.
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 1, "FRA", "MUC", 6, 7)), 201)
}
