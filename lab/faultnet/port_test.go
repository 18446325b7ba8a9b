package faultnet

import "testing"

// TestFreePort: a port already taken is never handed out again.
func TestFreePort(t *testing.T) {
	taken := map[int]bool{}
	for range 200 {
		p, err := FreePort(taken)
		if err != nil {
			t.Fatal(err)
		}
		if taken[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		taken[p] = true
	}
}
