package flights

import (
	"errors"
	"testing"
	"time"
)

// FuzzDecodeCursor feeds the page-cursor decoder what a client can send.
// It must not panic, must refuse with ErrBadCursor (a 400) what it cannot
// read, and a cursor it reads must name the same place once handed out
// again.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(Violation{ID: "continuity/R1/L1", Time: time.Date(2026, 3, 29, 10, 0, 0, 0, time.UTC)}))
	f.Add(encodeCursor(Violation{ID: "x", Time: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)}))
	f.Add("")
	f.Add("AAAAAAAAAAA")
	f.Add("AAAAAAAAAAAB")
	f.Add("not base64!")
	f.Fuzz(func(t *testing.T, c string) {
		k, err := decodeCursor(c)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrBadCursor", err)
			}
			return
		}
		if k == nil {
			if c != "" {
				t.Fatalf("cursor %q read as no cursor", c)
			}
			return
		}
		again, err := decodeCursor(encodeCursor(Violation{ID: k.id, Time: time.Unix(0, k.t)}))
		if err != nil || *again != *k {
			t.Fatalf("cursor %q: %+v, handed out again %+v %v", c, *k, again, err)
		}
	})
}
