package backend

import (
	"fmt"
	"unicode/utf8"

	"github.com/logbook/logbook/engine/eventstore"
)

// Limits are a store's eventstore.Limits with the defaults filled in, and
// the checks a backend makes with them before it touches storage: every
// read and write validates its stream id, tag or append first, so that
// all backends refuse the same input with the same *eventstore.LimitError.
type Limits struct {
	eventstore.Limits
}

// NewLimits returns l with unset fields at their defaults.
func NewLimits(l eventstore.Limits) Limits {
	return Limits{l.WithDefaults()}
}

func limitErr(kind error, format string, args ...any) error {
	return &eventstore.LimitError{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// ValidateStreamID checks a stream id: non-empty, valid UTF-8, no control
// characters (backends use NUL as a key separator), within the length limit.
func (l Limits) ValidateStreamID(stream string) error {
	if stream == "" {
		return limitErr(eventstore.ErrInvalidStreamID, "empty")
	}
	if len(stream) > l.MaxStreamIDBytes {
		return limitErr(eventstore.ErrInvalidStreamID, "%d bytes, limit %d", len(stream), l.MaxStreamIDBytes)
	}
	return checkText(eventstore.ErrInvalidStreamID, "stream id", stream)
}

// ValidateTag checks a tag the same way as a stream id, with its own limit.
func (l Limits) ValidateTag(tag string) error {
	if tag == "" {
		return limitErr(eventstore.ErrInvalidTag, "empty tag")
	}
	if len(tag) > l.MaxTagBytes {
		return limitErr(eventstore.ErrInvalidTag, "tag of %d bytes, limit %d", len(tag), l.MaxTagBytes)
	}
	return checkText(eventstore.ErrInvalidTag, "tag", tag)
}

func checkText(kind error, what, s string) error {
	if !utf8.ValidString(s) {
		return limitErr(kind, "%s %q is not valid UTF-8", what, s)
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f {
			return limitErr(kind, "%s %q has control character %U at byte %d", what, s, r, i)
		}
	}
	return nil
}

// ValidateAppend checks everything about an append that does not depend on
// the store's contents, so that a bad append is refused before anything is
// written.
func (l Limits) ValidateAppend(stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) error {
	if err := l.ValidateStreamID(stream); err != nil {
		return err
	}
	if expect < eventstore.NoStream {
		return limitErr(eventstore.ErrInvalidExpectedVersion, "%d", int64(expect))
	}
	if len(events) == 0 {
		return eventstore.ErrEmptyAppend
	}
	if len(events) > l.MaxAppendEvents {
		return limitErr(eventstore.ErrAppendTooLarge, "%d events, limit %d", len(events), l.MaxAppendEvents)
	}
	total := 0
	for i := range events {
		ev := &events[i]
		if ev.Type == "" {
			return limitErr(eventstore.ErrInvalidEvent, "event %d has no type", i)
		}
		if len(ev.Type) > l.MaxTypeBytes {
			return limitErr(eventstore.ErrInvalidEvent, "event %d type of %d bytes, limit %d", i, len(ev.Type), l.MaxTypeBytes)
		}
		if err := checkText(eventstore.ErrInvalidEvent, "event type", ev.Type); err != nil {
			return err
		}
		if ev.Version < 0 {
			return limitErr(eventstore.ErrInvalidEvent, "event %d has negative schema version %d", i, ev.Version)
		}
		if len(ev.Tags) > l.MaxTags {
			return limitErr(eventstore.ErrInvalidTag, "event %d has %d tags, limit %d", i, len(ev.Tags), l.MaxTags)
		}
		size := EventSize(ev)
		for j, tag := range ev.Tags {
			if err := l.ValidateTag(tag); err != nil {
				return err
			}
			for _, prev := range ev.Tags[:j] {
				if prev == tag {
					return limitErr(eventstore.ErrInvalidTag, "event %d repeats tag %q", i, tag)
				}
			}
		}
		if size > l.MaxEventBytes {
			return limitErr(eventstore.ErrEventTooLarge, "event %d is %d bytes, limit %d", i, size, l.MaxEventBytes)
		}
		total += size
	}
	if err := checkDistinctIDs(events); err != nil {
		return err
	}
	if total > l.MaxAppendBytes {
		return limitErr(eventstore.ErrAppendTooLarge, "%d bytes, limit %d", total, l.MaxAppendBytes)
	}
	return nil
}

// EventSize is the size an event counts for against the limits.
func EventSize(ev *eventstore.NewEvent) int {
	n := len(ev.Data) + len(ev.Type)
	for _, t := range ev.Tags {
		n += len(t)
	}
	for k, v := range ev.Meta {
		n += len(k) + len(v)
	}
	return n
}

// checkDistinctIDs refuses an append that gives two of its events the same
// non-zero ID.
func checkDistinctIDs(events []eventstore.NewEvent) error {
	if len(events) <= 32 {
		for i := range events {
			if events[i].ID.IsZero() {
				continue
			}
			for j := range events[:i] {
				if events[j].ID == events[i].ID {
					return limitErr(eventstore.ErrDuplicateEventID, "events %d and %d share id %s", j, i, events[i].ID)
				}
			}
		}
		return nil
	}
	seen := make(map[eventstore.ID]int, len(events))
	for i := range events {
		if events[i].ID.IsZero() {
			continue
		}
		if j, ok := seen[events[i].ID]; ok {
			return limitErr(eventstore.ErrDuplicateEventID, "events %d and %d share id %s", j, i, events[i].ID)
		}
		seen[events[i].ID] = i
	}
	return nil
}

// ValidateFilter checks what a subscription follows: a valid stream id
// or tag, or the whole log.
func (l Limits) ValidateFilter(f eventstore.Filter) error {
	switch f.Kind {
	case eventstore.FilterStream:
		return l.ValidateStreamID(f.Stream)
	case eventstore.FilterTag:
		return l.ValidateTag(f.Tag)
	case eventstore.FilterAll:
		return nil
	default:
		return fmt.Errorf("unknown filter kind %d", f.Kind)
	}
}

// ValidateSnapshot checks a snapshot before a backend compares it with its
// stream: a valid stream id, a seq, a schema version, a size within the
// append limit.
func (l Limits) ValidateSnapshot(snap eventstore.Snapshot) error {
	if err := l.ValidateStreamID(snap.Stream); err != nil {
		return err
	}
	if snap.Seq == 0 || snap.Version < 0 {
		return fmt.Errorf("%w: stream %q seq %d version %d", eventstore.ErrInvalidSnapshot, snap.Stream, snap.Seq, snap.Version)
	}
	if len(snap.Data) > l.MaxAppendBytes {
		return fmt.Errorf("%w: snapshot of %q is %d bytes, limit %d", eventstore.ErrInvalidSnapshot, snap.Stream, len(snap.Data), l.MaxAppendBytes)
	}
	return nil
}

// SnapshotBeyondVersion is the error for a snapshot taken after the
// stream's last event.
func SnapshotBeyondVersion(snap eventstore.Snapshot, version uint64) error {
	return fmt.Errorf("%w: snapshot of %q at seq %d, but the stream is at version %d", eventstore.ErrInvalidSnapshot, snap.Stream, snap.Seq, version)
}
