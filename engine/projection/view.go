package projection

import (
	"context"
	"fmt"
	"sync"

	"github.com/logbook/logbook/engine/eventstore"
)

// View is a read model the runtime keeps up to date. Queries are the
// view's own methods; they may run while Apply does.
type View interface {
	// Checkpoint returns the position of the last event whose effect the
	// view holds, 0 if none. The runner resumes after it. It must never be
	// ahead of the view's state; a view that filters duplicates may let it
	// lag behind (see the package documentation).
	Checkpoint(ctx context.Context) (uint64, error)
	// Apply applies events in log order, each once: on success the batch's
	// last position becomes the checkpoint, atomically with the batch's
	// effects (or, for a filtering view, after them). On error the view
	// must hold the effect of a prefix of the batch whose end its
	// checkpoint names, or be discarded; the runner stops. Apply may keep
	// the events but not the slice.
	Apply(ctx context.Context, batch []eventstore.Event) error
}

// Memory is a view held in memory, the common case: state S, changed
// event by event by a function. Its checkpoint lives and dies with the
// state, which makes it trivially exactly-once; a new Memory starts empty
// at position 0 and the runner rebuilds it from the log.
//
// A lock makes each batch appear to queries at once: Read never sees half
// a batch.
type Memory[S any] struct {
	apply func(state *S, ev eventstore.Event) error

	mu    sync.RWMutex
	state S
	pos   uint64
}

// NewMemory returns a view starting from state (typically a zero value
// with its maps made) that applies each event with apply.
func NewMemory[S any](state S, apply func(state *S, ev eventstore.Event) error) *Memory[S] {
	return &Memory[S]{apply: apply, state: state}
}

// Checkpoint implements View.
func (m *Memory[S]) Checkpoint(context.Context) (uint64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pos, nil
}

// Apply implements View. If apply fails on an event, the view keeps the
// events before it and its checkpoint names the last of them, so that the
// state still matches a prefix of the log.
func (m *Memory[S]) Apply(_ context.Context, batch []eventstore.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range batch {
		if err := m.apply(&m.state, ev); err != nil {
			return fmt.Errorf("event %d (%s seq %d, %s): %w", ev.Position, ev.Stream, ev.Seq, ev.Type, err)
		}
		m.pos = ev.Position
	}
	return nil
}

// Read calls fn with the state and the position it reflects, under a read
// lock: fn must not keep or change the state, nor call Apply.
func (m *Memory[S]) Read(fn func(state *S, pos uint64)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	fn(&m.state, m.pos)
}
