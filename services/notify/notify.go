// Package notify is the mass-notification service's domain: a send
// request (one notification type, one club, one sender, up to millions of
// recipients), the preference check that decides per recipient whether
// and on which channels it is sent, the build of one message per
// recipient and channel from a template and the user's data, the
// idempotency key of each delivery, and the batches deliveries go out in.
//
// The package holds no infrastructure: where users' data comes from and
// how messages are delivered are other packages' business.
package notify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Channel is a way to reach a user.
type Channel string

// The channels a notification can be delivered on.
const (
	Push  Channel = "push"
	Email Channel = "email"
)

// Channels lists every channel, in the order a recipient's messages are
// built.
var Channels = []Channel{Push, Email}

// MaxBatch is the most recipients one delivery call carries, as push
// providers allow.
const MaxBatch = 500

// Limits on a request's fields; beyond them a request is refused with a
// *InvalidRequestError.
const (
	MaxTypeLen   = 64
	MaxSenderLen = 128
)

// Request is one send request: notify every user in ToUsers of an event
// of the given type in a club.
type Request struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	ClubID    int64     `json:"club_id"`
	Sender    string    `json:"sender"`
	Timestamp time.Time `json:"timestamp"`
	ToUsers   []int64   `json:"to_users"`
}

// InvalidRequestError says which field of a request is wrong and why.
type InvalidRequestError struct {
	Field  string
	Reason string
}

func (e *InvalidRequestError) Error() string {
	return fmt.Sprintf("notify: invalid request: %s: %s", e.Field, e.Reason)
}

// Validate checks a request's fields; maxRecipients bounds ToUsers.
func (r *Request) Validate(maxRecipients int) error {
	switch {
	case r.ID == "":
		return &InvalidRequestError{"id", "is empty"}
	case r.Type == "":
		return &InvalidRequestError{"type", "is empty"}
	case len(r.Type) > MaxTypeLen:
		return &InvalidRequestError{"type", fmt.Sprintf("is longer than %d bytes", MaxTypeLen)}
	case r.Sender == "":
		return &InvalidRequestError{"sender", "is empty"}
	case len(r.Sender) > MaxSenderLen:
		return &InvalidRequestError{"sender", fmt.Sprintf("is longer than %d bytes", MaxSenderLen)}
	case r.Timestamp.IsZero():
		return &InvalidRequestError{"timestamp", "is missing"}
	case len(r.ToUsers) == 0:
		return &InvalidRequestError{"to_users", "is empty"}
	case len(r.ToUsers) > maxRecipients:
		return &InvalidRequestError{"to_users", fmt.Sprintf("has %d recipients, more than the limit of %d", len(r.ToUsers), maxRecipients)}
	}
	return nil
}

// User is what the preference check and the build read of one user.
type User struct {
	ID           int64
	Name         string
	Language     string // e.g. "en", "nl"; empty means the default language
	Email        string // empty: the user has no e-mail address
	DeviceTokens []string
	// OptOut is the global opt-out: no notification of any type that can
	// be opted out of.
	OptOut bool
	// Disabled lists the (type, channel) pairs the user turned off.
	// Everything not listed is on.
	Disabled map[Setting]bool
	// Forgotten: the user's personal data (name, addresses) was erased
	// at their request; nothing is sent to them.
	Forgotten bool
}

// Setting names one switch in a user's settings.
type Setting struct {
	Type    string
	Channel Channel
}

// Refusal is why a recipient gets nothing.
type Refusal string

// The reasons a recipient is refused. Refused recipients are counted by
// reason, never dropped silently.
const (
	RefusedUnknownUser Refusal = "unknown_user" // not in the users' data
	RefusedOptOut      Refusal = "opt_out"      // global opt-out
	RefusedSettings    Refusal = "settings"     // every channel turned off for the type
	RefusedNoAddress   Refusal = "no_address"   // allowed, but no device token and no e-mail address
	RefusedDuplicate   Refusal = "duplicate"    // listed again in the same request: notified once
	RefusedForgotten   Refusal = "forgotten"    // the user's personal data was erased at their request
)

// Policy says which notification types users cannot opt out of.
//
// A mandatory type (an account's security, a booking that was cancelled)
// ignores both the global opt-out and the per-type settings: it goes on
// every channel the user has an address for. Every other type goes on
// the channels the user has an address for, has not turned off for the
// type, and only if the user has not opted out globally.
type Policy struct {
	Mandatory map[string]bool
}

// Decision is the preference check's answer for one recipient: the
// channels to deliver on, or why none.
type Decision struct {
	Channels []Channel
	Refused  Refusal // empty when Channels is not
}

// Check decides where a notification of type typ goes for user u (nil:
// the user is unknown).
func (p Policy) Check(u *User, typ string) Decision {
	switch {
	case u == nil:
		return Decision{Refused: RefusedUnknownUser}
	case u.Forgotten:
		return Decision{Refused: RefusedForgotten}
	}
	mandatory := p.Mandatory[typ]
	if u.OptOut && !mandatory {
		return Decision{Refused: RefusedOptOut}
	}
	var chans []Channel
	allowed := 0
	for _, c := range Channels {
		if !mandatory && u.Disabled[Setting{typ, c}] {
			continue
		}
		allowed++
		if hasAddress(u, c) {
			chans = append(chans, c)
		}
	}
	switch {
	case allowed == 0:
		return Decision{Refused: RefusedSettings}
	case len(chans) == 0:
		return Decision{Refused: RefusedNoAddress}
	}
	return Decision{Channels: chans}
}

func hasAddress(u *User, c Channel) bool {
	switch c {
	case Push:
		return len(u.DeviceTokens) > 0
	case Email:
		return u.Email != ""
	}
	return false
}

// IdempotencyKey names one delivery: a request's notification to one
// user on one channel. A retried or replayed delivery carries the same
// key, so the endpoint can tell it already has it.
func IdempotencyKey(requestID string, userID int64, c Channel) string {
	return requestID + "/" + strconv.FormatInt(userID, 10) + "/" + string(c)
}

// Message is one delivery: what one user receives on one channel.
type Message struct {
	Key     string   `json:"key"` // IdempotencyKey
	UserID  int64    `json:"user_id"`
	Channel Channel  `json:"channel"`
	To      []string `json:"to"` // device tokens, or the one e-mail address
	Title   string   `json:"title"`
	Body    string   `json:"body"`
}

// Template is the text of one notification type in one language. In
// Title and Body, {name} is replaced by the user's name and {club} by the
// club's id.
type Template struct {
	Title string
	Body  string
}

// DefaultLanguage is the language used when a user's has no template.
const DefaultLanguage = "en"

// Templates holds the templates by type and language.
type Templates map[string]map[string]Template

// ErrNoTemplate is returned by Build for a type with no template in the
// user's language nor in DefaultLanguage.
var ErrNoTemplate = errors.New("notify: no template")

// Build makes the messages of request r for user u on the channels d
// allows, in d's order.
func (ts Templates) Build(r *Request, u *User, d Decision) ([]Message, error) {
	byLang := ts[r.Type]
	t, ok := byLang[u.Language]
	if !ok {
		t, ok = byLang[DefaultLanguage]
	}
	if !ok {
		return nil, fmt.Errorf("%w for type %q in %q or %q", ErrNoTemplate, r.Type, u.Language, DefaultLanguage)
	}
	club := strconv.FormatInt(r.ClubID, 10)
	// Not strings.NewReplacer: building one per user showed in a run's
	// CPU profile. The club (digits) goes in first, so a name that reads
	// "{club}" is left as the user wrote it.
	fill := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, "{club}", club), "{name}", u.Name)
	}
	title, body := fill(t.Title), fill(t.Body)
	msgs := make([]Message, 0, len(d.Channels))
	for _, c := range d.Channels {
		m := Message{Key: IdempotencyKey(r.ID, u.ID, c), UserID: u.ID, Channel: c, Title: title, Body: body}
		if c == Push {
			m.To = u.DeviceTokens
		} else {
			m.To = []string{u.Email}
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Batch is the body of one delivery call to a channel's endpoint.
type Batch struct {
	Messages []Message `json:"messages"`
}

// Batches splits msgs into consecutive slices of at most size (≤ 0 or
// more than MaxBatch: MaxBatch) messages; they share msgs' backing array.
func Batches(msgs []Message, size int) [][]Message {
	if size <= 0 || size > MaxBatch {
		size = MaxBatch
	}
	var out [][]Message
	for len(msgs) > 0 {
		n := min(size, len(msgs))
		out = append(out, msgs[:n:n])
		msgs = msgs[n:]
	}
	return out
}
