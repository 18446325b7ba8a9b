package notify

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func validRequest() Request {
	return Request{ID: "r1", Type: "like_update", ClubID: 8, Sender: "coach", Timestamp: time.Unix(1711741920, 0), ToUsers: []int64{1, 2}}
}

func TestValidate(t *testing.T) {
	r := validRequest()
	if err := r.Validate(10); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	cases := map[string]func(*Request){
		"id":        func(r *Request) { r.ID = "" },
		"type":      func(r *Request) { r.Type = strings.Repeat("t", MaxTypeLen+1) },
		"sender":    func(r *Request) { r.Sender = "" },
		"timestamp": func(r *Request) { r.Timestamp = time.Time{} },
		"to_users":  func(r *Request) { r.ToUsers = make([]int64, 11) },
	}
	for field, spoil := range cases {
		r := validRequest()
		spoil(&r)
		var ie *InvalidRequestError
		if err := r.Validate(10); !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("spoiled %s: got %v, want an InvalidRequestError on %s", field, err, field)
		}
	}
}

func TestCheck(t *testing.T) {
	p := Policy{Mandatory: map[string]bool{"security": true}}
	full := func() *User {
		return &User{ID: 1, Email: "a@example.com", DeviceTokens: []string{"tok"}, Disabled: map[Setting]bool{}}
	}
	both := []Channel{Push, Email}
	cases := []struct {
		name string
		user func() *User
		typ  string
		want Decision
	}{
		{"unknown user", func() *User { return nil }, "like_update", Decision{Refused: RefusedUnknownUser}},
		{"unknown user, mandatory type", func() *User { return nil }, "security", Decision{Refused: RefusedUnknownUser}},
		{"everything on", full, "like_update", Decision{Channels: both}},
		{"global opt-out", func() *User { u := full(); u.OptOut = true; return u }, "like_update", Decision{Refused: RefusedOptOut}},
		{"global opt-out, mandatory type", func() *User { u := full(); u.OptOut = true; return u }, "security", Decision{Channels: both}},
		{"push off for the type", func() *User { u := full(); u.Disabled[Setting{"like_update", Push}] = true; return u }, "like_update", Decision{Channels: []Channel{Email}}},
		{"push off for another type", func() *User { u := full(); u.Disabled[Setting{"event_waiting_list", Push}] = true; return u }, "like_update", Decision{Channels: both}},
		{"both off", func() *User {
			u := full()
			u.Disabled[Setting{"like_update", Push}] = true
			u.Disabled[Setting{"like_update", Email}] = true
			return u
		}, "like_update", Decision{Refused: RefusedSettings}},
		{"both off, mandatory type", func() *User {
			u := full()
			u.Disabled[Setting{"security", Push}] = true
			u.Disabled[Setting{"security", Email}] = true
			return u
		}, "security", Decision{Channels: both}},
		{"no addresses", func() *User { return &User{ID: 1} }, "like_update", Decision{Refused: RefusedNoAddress}},
		{"no addresses, mandatory", func() *User { return &User{ID: 1} }, "security", Decision{Refused: RefusedNoAddress}},
		{"e-mail off, no device", func() *User {
			u := full()
			u.DeviceTokens = nil
			u.Disabled[Setting{"like_update", Email}] = true
			return u
		}, "like_update", Decision{Refused: RefusedNoAddress}},
		{"nil settings map", func() *User { u := full(); u.Disabled = nil; return u }, "like_update", Decision{Channels: both}},
	}
	for _, c := range cases {
		if got := p.Check(c.user(), c.typ); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestBuild(t *testing.T) {
	ts := Templates{"like_update": {
		"en": {Title: "Hi {name}", Body: "A like in club {club}"},
		"nl": {Title: "Hoi {name}", Body: "Een like in club {club}"},
	}}
	r := validRequest()
	u := &User{ID: 7, Name: "Ann", Language: "nl", Email: "ann@example.com", DeviceTokens: []string{"t1", "t2"}}
	msgs, err := ts.Build(&r, u, Decision{Channels: []Channel{Push, Email}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{Key: "r1/7/push", UserID: 7, Channel: Push, To: []string{"t1", "t2"}, Title: "Hoi Ann", Body: "Een like in club 8"},
		{Key: "r1/7/email", UserID: 7, Channel: Email, To: []string{"ann@example.com"}, Title: "Hoi Ann", Body: "Een like in club 8"},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("got %+v\nwant %+v", msgs, want)
	}

	u.Language = "fr" // no French template: English
	msgs, err = ts.Build(&r, u, Decision{Channels: []Channel{Email}})
	if err != nil || len(msgs) != 1 || msgs[0].Title != "Hi Ann" {
		t.Fatalf("fallback to English: %+v, %v", msgs, err)
	}

	u.Name = "{club}" // a name is not a placeholder
	msgs, err = ts.Build(&r, u, Decision{Channels: []Channel{Email}})
	if err != nil || msgs[0].Title != "Hi {club}" {
		t.Fatalf("name read as a placeholder: %+v, %v", msgs, err)
	}

	r.Type = "event_waiting_list"
	if _, err := ts.Build(&r, u, Decision{Channels: []Channel{Email}}); !errors.Is(err, ErrNoTemplate) {
		t.Fatalf("type without a template: got %v, want ErrNoTemplate", err)
	}
}

func TestIdempotencyKeysDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, req := range []string{"r1", "r11", "r"} {
		for _, user := range []int64{1, 11, 111} {
			for _, c := range Channels {
				k := IdempotencyKey(req, user, c)
				if seen[k] {
					t.Fatalf("key %q given twice", k)
				}
				seen[k] = true
			}
		}
	}
}

func TestBatches(t *testing.T) {
	for _, n := range []int{0, 1, 499, 500, 501, 1234} {
		msgs := make([]Message, n)
		for i := range msgs {
			msgs[i].UserID = int64(i)
		}
		for _, size := range []int{0, 7, 500, 10000} {
			limit := size
			if limit <= 0 || limit > MaxBatch {
				limit = MaxBatch
			}
			next := int64(0)
			for _, b := range Batches(msgs, size) {
				if len(b) == 0 || len(b) > limit {
					t.Fatalf("n=%d size=%d: batch of %d", n, size, len(b))
				}
				for _, m := range b {
					if m.UserID != next {
						t.Fatalf("n=%d size=%d: message %d out of order", n, size, m.UserID)
					}
					next++
				}
			}
			if next != int64(n) {
				t.Fatalf("n=%d size=%d: batches hold %d messages", n, size, next)
			}
		}
	}
}
