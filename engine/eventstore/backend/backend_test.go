package backend

import (
	"errors"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotifierWakesOnlyWhatChanged(t *testing.T) {
	var n Notifier
	a := n.Changed(eventstore.OfStream("a"))
	b := n.Changed(eventstore.OfStream("b"))
	red := n.Changed(eventstore.Tagged("red"))
	blue := n.Changed(eventstore.Tagged("blue"))
	all := n.Changed(eventstore.All())
	if n.Changed(eventstore.OfStream("a")) != a {
		t.Fatal("two waiters on one stream got different channels")
	}

	n.Publish([]string{"a"}, map[string]struct{}{"red": {}})
	if !closed(a) || !closed(red) || !closed(all) {
		t.Fatal("a commit to stream a tagged red did not wake a, red and the whole log")
	}
	if closed(b) || closed(blue) {
		t.Fatal("a commit to stream a tagged red woke stream b or tag blue")
	}
	if closed(n.Changed(eventstore.OfStream("a"))) {
		t.Fatal("a waiter taken after the publish is already woken")
	}

	n.Close()
	if !closed(b) || !closed(blue) {
		t.Fatal("Close left waiters asleep")
	}
	if !closed(n.Changed(eventstore.Tagged("green"))) {
		t.Fatal("Changed after Close returned an open channel")
	}
}

func TestReadOnly(t *testing.T) {
	var r ReadOnly
	if _, err := r.Append(t.Context(), "s", eventstore.Any, []eventstore.NewEvent{{Type: "t"}}); !errors.Is(err, eventstore.ErrReadOnly) {
		t.Fatalf("Append: %v, want ErrReadOnly", err)
	}
	if err := r.SaveSnapshot(t.Context(), eventstore.Snapshot{Stream: "s", Seq: 1}); !errors.Is(err, eventstore.ErrReadOnly) {
		t.Fatalf("SaveSnapshot: %v, want ErrReadOnly", err)
	}
}

func TestLimits(t *testing.T) {
	l := NewLimits(eventstore.Limits{MaxTags: 2})
	if l.MaxTags != 2 || l.MaxEventBytes != 1<<20 || l.MaxStreamIDBytes != 256 {
		t.Fatalf("NewLimits kept or filled wrongly: %+v", l.Limits)
	}
	err := l.ValidateAppend("s", eventstore.Any, []eventstore.NewEvent{{Type: "t", Tags: []string{"x", "y", "z"}}})
	var le *eventstore.LimitError
	if !errors.As(err, &le) || !errors.Is(err, eventstore.ErrInvalidTag) {
		t.Fatalf("three tags, limit two: %v, want a *LimitError of ErrInvalidTag", err)
	}
	if err := l.ValidateStreamID("a\x00b"); !errors.Is(err, eventstore.ErrInvalidStreamID) {
		t.Fatalf("stream id with NUL: %v", err)
	}
	if err := l.ValidateFilter(eventstore.Tagged("")); !errors.Is(err, eventstore.ErrInvalidTag) {
		t.Fatalf("empty tag filter: %v", err)
	}
	ev := eventstore.NewEvent{Type: "ab", Tags: []string{"c"}, Meta: map[string]string{"d": "ef"}, Data: []byte("gh")}
	if got := EventSize(&ev); got != 8 {
		t.Fatalf("EventSize = %d, want 8 (type, tags, meta keys and values, data)", got)
	}
}

// TestNotifierPublishAll: Selective says whether anyone waits for a
// particular stream or tag; PublishAll wakes every waiter, of the whole
// log, a stream or a tag, and Changed afterwards waits again.
func TestNotifierPublishAll(t *testing.T) {
	var n Notifier
	all := n.Changed(eventstore.All())
	if n.Selective() {
		t.Fatal("selective with only the whole log followed")
	}
	stream, tag := n.Changed(eventstore.OfStream("s")), n.Changed(eventstore.Tagged("t"))
	if !n.Selective() {
		t.Fatal("not selective with a stream and a tag followed")
	}
	n.PublishAll()
	for name, ch := range map[string]<-chan struct{}{"all": all, "stream": stream, "tag": tag} {
		select {
		case <-ch:
		default:
			t.Errorf("PublishAll did not wake the %s waiter", name)
		}
	}
	if n.Selective() {
		t.Error("still selective after every waiter was woken")
	}
	select {
	case <-n.Changed(eventstore.OfStream("s")):
		t.Error("a new waiter was woken before anything was published")
	default:
	}
}
