package backend

import (
	"sync"

	"github.com/logbook/logbook/engine/eventstore"
)

// Notifier is the Changed half of a Tail: it wakes
// subscriptions when the backend publishes newly readable events. Waiters
// are keyed by what they follow, so a commit to one stream wakes only that
// stream's subscribers, not every idle one of a hundred thousand. The zero
// value is ready to use.
type Notifier struct {
	mu      sync.Mutex
	closed  bool
	all     chan struct{}
	streams map[string]chan struct{}
	tags    map[string]chan struct{}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Changed implements Tail.Changed.
func (n *Notifier) Changed(f eventstore.Filter) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return closedChan
	}
	switch f.Kind {
	case eventstore.FilterStream:
		return waiter(&n.streams, f.Stream)
	case eventstore.FilterTag:
		return waiter(&n.tags, f.Tag)
	default:
		if n.all == nil {
			n.all = make(chan struct{})
		}
		return n.all
	}
}

func waiter(m *map[string]chan struct{}, key string) chan struct{} {
	if *m == nil {
		*m = make(map[string]chan struct{})
	}
	ch, ok := (*m)[key]
	if !ok {
		ch = make(chan struct{})
		(*m)[key] = ch
	}
	return ch
}

// Publish wakes the waiters of streams and tags, and of the whole log,
// once their new events are readable.
func (n *Notifier) Publish(streams []string, tags map[string]struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.all != nil {
		close(n.all)
		n.all = nil
	}
	if len(n.streams) > 0 {
		for _, s := range streams {
			if ch, ok := n.streams[s]; ok {
				close(ch)
				delete(n.streams, s)
			}
		}
	}
	if len(n.tags) > 0 {
		for t := range tags {
			if ch, ok := n.tags[t]; ok {
				close(ch)
				delete(n.tags, t)
			}
		}
	}
}

// Selective reports whether anyone waits for particular streams or
// tags. When no one does, a publisher need not find out which streams
// and tags a stretch of the log holds (parse them, or read them from a
// store): PublishAll wakes every waiter without them, so one that
// registered after Selective answered but before PublishAll is woken
// too; one that registers later reads the new events anyway (they were
// readable before they were published).
func (n *Notifier) Selective() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.streams) > 0 || len(n.tags) > 0
}

// PublishAll wakes every waiter, of whatever it follows: for new events
// whose streams and tags the publisher did not find out (Selective).
func (n *Notifier) PublishAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.all != nil {
		close(n.all)
		n.all = nil
	}
	for _, ch := range n.streams {
		close(ch)
	}
	for _, ch := range n.tags {
		close(ch)
	}
	clear(n.streams)
	clear(n.tags)
}

// Close wakes every waiter for good: Changed returns closed channels from
// now on.
func (n *Notifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	if n.all != nil {
		close(n.all)
	}
	for _, ch := range n.streams {
		close(ch)
	}
	for _, ch := range n.tags {
		close(ch)
	}
	n.all, n.streams, n.tags = nil, nil, nil
}
