// Package notifymonolith is the baseline the notify pipeline is measured
// against: the monolith (vg-monolith) of Xiao's "Mass Communication System" study, which did a send request's
// whole work synchronously in the request that asked for it. It resolves
// every recipient with one query on the users' database —
// `SELECT … FROM users … WHERE id IN ($1, …, $n)`, the users' rows with
// their settings and devices — then checks preferences, builds and
// delivers with the same domain code as the pipeline (notify.Processor,
// deliver.Deliverer), and answers once the last batch is delivered.
//
// That one query is its limit, as it was the study's: PostgreSQL's
// extended protocol carries at most 65,535 bind parameters, so a request
// to 100,000 recipients fails. The failure is the driver's own error,
// returned as it comes; nothing here checks the count first.
package notifymonolith

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
)

// Monolith sends requests synchronously.
type Monolith struct {
	Pool      *pgxpool.Pool // the users' database
	Schema    string        // where its users, user_settings and user_devices tables are ("" public)
	Policy    notify.Policy
	Templates notify.Templates
	Deliverer *deliver.Deliverer
	Senders   int // batches in flight at once (default: notify.Processor's)
	// MaxRecipients bounds a request's recipients (default 10,000,000);
	// it is not the query's limit, which is left to the database.
	MaxRecipients int
}

// Result is what one request came to.
type Result struct {
	notify.Counts
	Retries int64 `json:"retries"` // delivery calls retried
}

// Send does request r's whole work: one lookup of every recipient, the
// preference check, the build and delivery. Delivery failures are
// counted; the error is the lookup's (at 65,536 recipients or more, the
// driver's refusal of the query), a build's or the context's.
func (m *Monolith) Send(ctx context.Context, r *notify.Request) (Result, error) {
	maxRecipients := m.MaxRecipients
	if maxRecipients <= 0 {
		maxRecipients = 10_000_000
	}
	if err := r.Validate(maxRecipients); err != nil {
		return Result{}, err
	}
	var retries atomic.Int64
	p := notify.Processor{
		Policy:    m.Policy,
		Templates: m.Templates,
		Chunk:     len(r.ToUsers), // every recipient in the one query
		Senders:   m.Senders,
	}
	counts, err := p.Process(ctx, r, oneQuery{m}, func(ctx context.Context, batch []notify.Message) error {
		n, err := m.Deliverer.Deliver(ctx, batch)
		retries.Add(int64(n))
		return err
	})
	return Result{Counts: counts, Retries: retries.Load()}, err
}

// oneQuery looks users up the monolith's way: all of them in one
// statement, one bind parameter per id.
type oneQuery struct{ m *Monolith }

func (q oneQuery) table(name string) string {
	schema := q.m.Schema
	if schema == "" {
		schema = "public"
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

func (q oneQuery) Users(ctx context.Context, ids []int64) (map[int64]*notify.User, error) {
	var sql strings.Builder
	sql.WriteString(`SELECT u.id, u.name, u.language, coalesce(u.email, ''), u.opt_out,
	coalesce(s.types, '{}'), coalesce(s.channels, '{}'), coalesce(d.tokens, '{}')
FROM ` + q.table("users") + ` u
LEFT JOIN LATERAL (SELECT array_agg(type ORDER BY type, channel) AS types, array_agg(channel ORDER BY type, channel) AS channels
	FROM ` + q.table("user_settings") + ` WHERE user_id = u.id AND NOT enabled) s ON true
LEFT JOIN LATERAL (SELECT array_agg(token ORDER BY id) AS tokens
	FROM ` + q.table("user_devices") + ` WHERE user_id = u.id) d ON true
WHERE u.id IN (`)
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString("$")
		sql.WriteString(strconv.Itoa(i + 1))
		args[i] = id
	}
	sql.WriteString(")")
	rows, err := q.m.Pool.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]*notify.User, len(ids))
	for rows.Next() {
		u := &notify.User{}
		var types, channels []string
		if err := rows.Scan(&u.ID, &u.Name, &u.Language, &u.Email, &u.OptOut, &types, &channels, &u.DeviceTokens); err != nil {
			return nil, err
		}
		for i := range types {
			if u.Disabled == nil {
				u.Disabled = map[notify.Setting]bool{}
			}
			u.Disabled[notify.Setting{Type: types[i], Channel: notify.Channel(channels[i])}] = true
		}
		out[u.ID] = u
	}
	return out, rows.Err()
}

// Path is where the Handler takes send requests.
const Path = "/api/notifications"

// SendBody is a send request as posted to the Handler: the pipeline's
// body, the id taken from the Idempotency-Key header.
type SendBody struct {
	Type      string    `json:"type"`
	ClubID    int64     `json:"club_id"`
	Sender    string    `json:"sender"`
	Timestamp time.Time `json:"timestamp"`
	ToUsers   []int64   `json:"to_users"`
}

// Answer is the Handler's answer to a request it completed.
type Answer struct {
	ID         string `json:"id"`
	Recipients int    `json:"recipients"`
	Result
}

// Handler serves POST Path: it does the request's whole work before it
// answers — 200 with the counts, 400 for a bad request, or 500 with the
// failure's reason (the lookup's error as the driver gave it). It checks
// no token: it is a benchmark's baseline, served on loopback.
func (m *Monolith) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get("Idempotency-Key")
		if key == "" {
			problem.Write(w, problem.New(http.StatusBadRequest, "the Idempotency-Key header is missing"))
			return
		}
		var b SendBody
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 256<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			problem.Write(w, problem.New(http.StatusBadRequest, fmt.Sprintf("request body: %v", err)))
			return
		}
		r := &notify.Request{ID: key, Type: b.Type, ClubID: b.ClubID, Sender: b.Sender, Timestamp: b.Timestamp, ToUsers: b.ToUsers}
		res, err := m.Send(req.Context(), r)
		if err != nil {
			status := http.StatusInternalServerError
			if _, ok := errors.AsType[*notify.InvalidRequestError](err); ok {
				status = http.StatusBadRequest
			}
			problem.Write(w, problem.New(status, err.Error()))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Answer{ID: key, Recipients: len(b.ToUsers), Result: res})
	})
	return mux
}
