package notify

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

type userMap map[int64]*User

func (m userMap) Users(_ context.Context, ids []int64) (map[int64]*User, error) {
	out := make(map[int64]*User, len(ids))
	for _, id := range ids {
		if u, ok := m[id]; ok {
			out[id] = u
		}
	}
	return out, nil
}

// A randomized population: the counts add up, every allowed (recipient,
// channel) is sent exactly once, nothing refused is sent, and a batch
// that fails is counted and handed to OnFailed.
func TestProcess(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	users := userMap{}
	var ids []int64
	for id := range int64(20_000) {
		ids = append(ids, id)
		if rng.IntN(50) == 0 {
			continue // unknown
		}
		u := &User{ID: id, Name: "u", Disabled: map[Setting]bool{}}
		if rng.IntN(3) > 0 {
			u.DeviceTokens = []string{"t"}
		}
		if rng.IntN(3) > 0 {
			u.Email = "e@example.com"
		}
		u.OptOut = rng.IntN(10) == 0
		if rng.IntN(5) == 0 {
			u.Disabled[Setting{"like_update", Push}] = true
		}
		users[id] = u
	}
	ids = append(ids, 5, 6, 7) // listed twice
	r := &Request{ID: "req", Type: "like_update", ClubID: 1, Sender: "s", Timestamp: time.Now(), ToUsers: ids}

	want := map[string]bool{}
	refused := int64(3)
	for _, id := range ids[:20_000] {
		d := Policy{}.Check(users.lookup(id), r.Type)
		if d.Refused != "" {
			refused++
		}
		for _, c := range d.Channels {
			want[IdempotencyKey(r.ID, id, c)] = true
		}
	}

	var mu sync.Mutex
	got := map[string]int{}
	failedBatches := 0
	var deadLetters int
	p := &Processor{Templates: Templates{"like_update": {"en": {Title: "t", Body: "b"}}}, Chunk: 777, Senders: 4,
		OnFailed: func(b []Message, err error) { mu.Lock(); deadLetters += len(b); mu.Unlock() }}
	send := func(_ context.Context, b []Message) error {
		if len(b) == 0 || len(b) > MaxBatch {
			t.Errorf("batch of %d", len(b))
		}
		mu.Lock()
		defer mu.Unlock()
		if b[0].Key == IdempotencyKey(r.ID, 0, b[0].Channel) || rng.IntN(20) == 0 {
			failedBatches++
			return errors.New("down")
		}
		for _, m := range b {
			got[m.Key]++
		}
		return nil
	}
	c, err := p.Process(context.Background(), r, users, send)
	if err != nil {
		t.Fatal(err)
	}
	var refusedSum int64
	for _, n := range c.Refused {
		refusedSum += n
	}
	if c.Requested != int64(len(ids)) || refusedSum != refused || c.Refused[RefusedDuplicate] != 3 {
		t.Fatalf("counts %+v, want %d refused", c, refused)
	}
	if c.Built != int64(len(want)) || c.Delivered+c.Failed != c.Built || c.Failed != int64(deadLetters) || failedBatches == 0 {
		t.Fatalf("counts %+v, %d allowed, %d dead letters", c, len(want), deadLetters)
	}
	if int64(len(got)) != c.Delivered {
		t.Fatalf("%d keys sent, %d delivered", len(got), c.Delivered)
	}
	for k, n := range got {
		if n != 1 || !want[k] {
			t.Fatalf("key %s sent %d times, allowed %v", k, n, want[k])
		}
	}
}

func (m userMap) lookup(id int64) *User { return m[id] }

func TestProcessStopsOnLookupError(t *testing.T) {
	p := &Processor{}
	r := &Request{ID: "r", Type: "x", ToUsers: []int64{1}}
	_, err := p.Process(context.Background(), r, failingUsers{}, func(context.Context, []Message) error { return nil })
	if err == nil {
		t.Fatal("lookup error swallowed")
	}
}

type failingUsers struct{}

func (failingUsers) Users(context.Context, []int64) (map[int64]*User, error) {
	return nil, errors.New("database down")
}
