package nemesis

import "testing"

// TestFreePortExcept: a port already taken is never handed out again.
func TestFreePortExcept(t *testing.T) {
	taken := map[int]bool{}
	for range 200 {
		p, err := freePortExcept(taken)
		if err != nil {
			t.Fatal(err)
		}
		if taken[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		taken[p] = true
	}
}
