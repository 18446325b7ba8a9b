// Package pipeline is the notify service on the log: a send request is
// accepted into events (one header, then its recipients in chunks, in one
// atomic append), a checkpointed pipeline runs each chunk through the
// preference check, the build and delivery, and appends the chunk's
// outcome — its counts and the dead letters of deliveries that failed
// for good — in one append that is also the chunk's checkpoint. The
// service's state (requests and their counts, dead letters, replays) is a
// view of those events, and the metrics are a windowed aggregation of
// the outcomes (docs/ARCHITECTURE.md, "Notifications").
package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/services/notify"
)

// Tag is carried by every event of the service but the recipient chunks
// (which are read by stream): the state view and the metrics follow it.
const Tag = "notify"

// Event types.
const (
	TypeRequested       = "NotificationRequested"     // the header of a send request
	TypeRecipients      = "NotificationRecipients"    // one chunk of its recipients
	TypeOutcome         = "NotificationOutcome"       // what a chunk, or a replay of a request's dead letters, came to
	TypeDeadLettered    = "NotificationDeadLettered"  // a batch that failed for good
	TypeReplayRequested = "DeadLetterReplayRequested" // dead letters to deliver again
)

// Requested is the header event of a send request.
type Requested struct {
	ID        string    `json:"id"`
	Key       string    `json:"idempotency_key"`
	Hash      string    `json:"hash"` // of the request as sent: a retry with another body is told apart
	Type      string    `json:"type"`
	ClubID    int64     `json:"club_id"`
	Sender    string    `json:"sender"`
	Timestamp time.Time `json:"timestamp"`
	ToClub    bool      `json:"to_club,omitempty"`
	// Listed is the recipients as sent, Recipients the distinct ones
	// (Listed - Recipients were listed twice: refused as duplicates).
	Listed     int `json:"listed"`
	Recipients int `json:"recipients"`
	Chunks     int `json:"chunks"`
}

// Recipients is one chunk of a request's distinct recipients: event
// 2+Chunk of the request's stream.
type Recipients struct {
	Request string  `json:"request"`
	Chunk   int     `json:"chunk"`
	UserIDs []int64 `json:"user_ids"`
}

// Counts are what a chunk or a replay came to. Requested counts
// recipients; Refused recipients (by reason) at a send, messages at a
// replay; Built, Delivered, Failed and DeadLettered count messages (one
// per recipient and channel); Retries counts delivery calls repeated.
type Counts struct {
	Requested    int64            `json:"requested"`
	Refused      int64            `json:"refused"`
	RefusedBy    map[string]int64 `json:"refused_by,omitempty"`
	Built        int64            `json:"built"`
	Delivered    int64            `json:"delivered"`
	Failed       int64            `json:"failed"`
	DeadLettered int64            `json:"dead_lettered"`
	Retries      int64            `json:"retries"`
}

func (c *Counts) add(o Counts) {
	c.Requested += o.Requested
	c.Refused += o.Refused
	for r, n := range o.RefusedBy {
		if c.RefusedBy == nil {
			c.RefusedBy = map[string]int64{}
		}
		c.RefusedBy[r] += n
	}
	c.Built += o.Built
	c.Delivered += o.Delivered
	c.Failed += o.Failed
	c.DeadLettered += o.DeadLettered
	c.Retries += o.Retries
}

func (c *Counts) refuse(r notify.Refusal, n int64) {
	if n == 0 {
		return
	}
	if c.RefusedBy == nil {
		c.RefusedBy = map[string]int64{}
	}
	c.RefusedBy[string(r)] += n
	c.Refused += n
}

// Outcome is the event of a chunk done (Replay empty) or of one
// request's dead letters replayed (Chunk -1). It carries the request's
// type, club, sender and timestamp for the metrics.
type Outcome struct {
	Request   string    `json:"request"`
	Chunk     int       `json:"chunk"`
	Replay    string    `json:"replay,omitempty"`
	Replayed  []string  `json:"replayed,omitempty"` // the dead letters a replay delivered again
	Type      string    `json:"type"`
	ClubID    int64     `json:"club_id"`
	Sender    string    `json:"sender"`
	Timestamp time.Time `json:"timestamp"`
	Counts
}

// DeadLetter is a batch that failed for good: who, on which channel,
// and why. A replay rebuilds the messages from the users' data with the
// same idempotency keys.
type DeadLetter struct {
	ID       string         `json:"id"`
	Request  string         `json:"request"`
	Chunk    int            `json:"chunk"`
	Replay   string         `json:"replay,omitempty"` // the replay it failed in, if any
	Channel  notify.Channel `json:"channel"`
	UserIDs  []int64        `json:"user_ids"`
	Reason   string         `json:"reason"`
	Attempts int            `json:"attempts"`
}

// ReplayRequested asks for dead letters to be delivered again.
type ReplayRequested struct {
	ID          string    `json:"id"`
	Hash        string    `json:"hash,omitempty"` // of the replay as asked: a retry with another body is told apart
	DeadLetters []string  `json:"dead_letters"`
	Skipped     []Skipped `json:"skipped,omitempty"` // named, but held by another replay or replayed
}

// Streams.
func requestStream(id string) string  { return "notification-" + id }
func outcomeStream(id string) string  { return "notification-" + id + "-outcomes" }
func replayStream(id string) string   { return "notification-replay-" + id }
func replayOutcomes(id string) string { return "notification-replay-" + id + "-outcomes" }

// RequestID is a request's id: from its sender and idempotency key, so
// that a retry names the same request.
func RequestID(sender, key string) string {
	h := sha256.Sum256([]byte("notify-request\x00" + sender + "\x00" + key))
	return hex.EncodeToString(h[:16])
}

// eventID makes an event's id from what it is, so that an append retried
// after a crash or by a client is recognised by the store.
func eventID(parts ...string) eventstore.ID {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var id eventstore.ID
	copy(id[:], h.Sum(nil))
	return id
}

func itoa(n int) string { return strconv.Itoa(n) }

func isConflict(err error) bool {
	return err != nil && errors.Is(err, eventstore.ErrVersionConflict)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
