package pebblestore

import (
	"sync"

	"github.com/logbook/logbook/eventstore"
)

// notifier wakes subscriptions when the syncer publishes a group. Waiters
// are keyed by what they follow, so a commit to one stream wakes only that
// stream's subscribers, not every idle one of a hundred thousand.
type notifier struct {
	mu      sync.Mutex
	closed  bool
	all     chan struct{}
	streams map[string]chan struct{}
	tags    map[string]chan struct{}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (n *notifier) changed(f eventstore.Filter) <-chan struct{} {
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

// publish is called after the durable head has moved past a group's events.
func (n *notifier) publish(streams []string, tags map[string]struct{}) {
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

func (n *notifier) close() {
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
