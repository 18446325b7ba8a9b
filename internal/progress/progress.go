// Package progress lets long work report how far it has come, and shows
// that as a bar on a terminal.
//
// The work counts into a Counter with one atomic add per unit, so that
// counting costs nothing a benchmark would notice; a Bar polls the counter
// a few times a second and draws it with mpb. A nil *Counter counts
// nothing, so work can report progress unconditionally.
package progress

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Counter is how far some work has come: done of total units of the
// current phase. A total of 0 means unknown.
type Counter struct {
	done, total atomic.Int64
	phase       atomic.Pointer[string]
}

// Start begins a phase named name (what is counted: "events",
// "requests") of total units, with nothing done yet.
func (c *Counter) Start(name string, total int) {
	if c == nil {
		return
	}
	c.phase.Store(&name)
	c.total.Store(int64(total))
	c.done.Store(0)
}

// Add counts n more units done.
func (c *Counter) Add(n int) {
	if c != nil {
		c.done.Add(int64(n))
	}
}

// Set says done units are done, for work that knows its position.
func (c *Counter) Set(done, total int) {
	if c != nil {
		c.total.Store(int64(total))
		c.done.Store(int64(done))
	}
}

// Load returns the current phase and its progress.
func (c *Counter) Load() (phase string, done, total int64) {
	if p := c.phase.Load(); p != nil {
		phase = *p
	}
	return phase, c.done.Load(), c.total.Load()
}

// Bar draws a counter on w until Stop.
type Bar struct {
	p    *mpb.Progress
	stop chan struct{}
	wg   sync.WaitGroup
}

// refresh is how often the bar is redrawn.
const refresh = 150 * time.Millisecond

// Show draws c as a bar on w, labelled with title, until Stop is called.
// w should be a terminal: the bar redraws itself in place, whatever w is.
func Show(w io.Writer, title string, c *Counter) *Bar {
	b := &Bar{p: mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(refresh), mpb.WithWidth(40), mpb.WithAutoRefresh()), stop: make(chan struct{})}
	bar := b.p.New(0, mpb.BarStyle(),
		mpb.PrependDecorators(
			decor.Name(title+" ", decor.WC{C: decor.DindentRight}),
			decor.Elapsed(decor.ET_STYLE_MMSS, decor.WC{W: 6, C: decor.DindentRight}),
		),
		mpb.AppendDecorators(
			decor.Any(func(decor.Statistics) string {
				phase, done, total := c.Load()
				switch {
				case total > 0:
					return formatCount(done) + " / " + formatCount(total) + " " + phase
				case done > 0:
					return formatCount(done) + " " + phase
				}
				return phase
			}, decor.WC{C: decor.DextraSpace}),
		),
	)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(refresh)
		defer t.Stop()
		for {
			_, done, total := c.Load()
			if total > 0 {
				bar.SetTotal(total, false)
				bar.SetCurrent(min(done, total))
			}
			select {
			case <-t.C:
			case <-b.stop:
				if total <= 0 {
					total = max(done, 1)
				}
				bar.SetTotal(total, false)
				bar.SetCurrent(total)
				bar.SetTotal(-1, true)
				return
			}
		}
	}()
	return b
}

// Stop draws the bar a last time, complete, and returns once it is drawn.
// It is safe on a nil *Bar.
func (b *Bar) Stop() {
	if b == nil {
		return
	}
	close(b.stop)
	b.wg.Wait()
	b.p.Wait()
}

// formatCount writes n with thousands separators.
func formatCount(n int64) string {
	s := []byte{}
	neg := n < 0
	if neg {
		n = -n
	}
	for i := 0; ; i++ {
		if i > 0 && i%3 == 0 {
			s = append(s, ',')
		}
		s = append(s, byte('0'+n%10))
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		s = append(s, '-')
	}
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return string(s)
}
