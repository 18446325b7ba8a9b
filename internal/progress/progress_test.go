package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestNilCounterCountsNothing(t *testing.T) {
	var c *Counter
	c.Start("events", 10)
	c.Add(3)
	c.Set(1, 2)
}

func TestBarShowsTheCount(t *testing.T) {
	var out bytes.Buffer
	c := &Counter{}
	c.Start("events", 2000)
	b := Show(&out, "bench append", c)
	c.Add(1500)
	time.Sleep(2 * refresh)
	b.Stop()
	s := out.String()
	for _, want := range []string{"bench append", "1,500 / 2,000 events"} {
		if !strings.Contains(s, want) {
			t.Errorf("bar output lacks %q:\n%q", want, s)
		}
	}
}

func TestFormatCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := formatCount(n); got != want {
			t.Errorf("formatCount(%d) = %q, want %q", n, got, want)
		}
	}
}
