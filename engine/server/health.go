package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/logbook/logbook/engine/eventstore"
)

// A Check tells whether a server can do its work, for GET /healthz. It
// returns the fields to add to the answer beside "status": "ok" (the
// log's head, a view's state), or an error — made with Unavailable to say
// which part failed.
type Check func(ctx context.Context) (map[string]any, error)

// Unavailable is the error of a Check whose part what ("store",
// "repository") failed with err: /healthz answers "what unavailable",
// and err goes to the log only.
func Unavailable(what string, err error) error { return &unavailable{what, err} }

type unavailable struct {
	what string
	err  error
}

func (u *unavailable) Error() string { return u.what + " unavailable: " + u.err.Error() }
func (u *unavailable) Unwrap() error { return u.err }

// StoreCheck checks that store can be read and has not failed (see
// eventstore.Healthy), and gives the log's head as "head".
func StoreCheck(store eventstore.Store) Check {
	return func(ctx context.Context) (map[string]any, error) {
		head, err := store.Head(ctx)
		if err == nil {
			err = eventstore.Healthy(store)
		}
		if err != nil {
			return nil, Unavailable("store", err)
		}
		return map[string]any{"head": head}, nil
	}
}

// healthHandler answers GET /healthz: 200 with {"status":"ok", fields…}
// when check passes, else 503 saying what is unavailable. It needs no
// token (load balancers ask it), so a failure is answered without its
// details, which go to the log.
func healthHandler(check Check, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var fields map[string]any
		var err error
		if check != nil {
			fields, err = check(r.Context())
		}
		if err != nil {
			what := "service"
			var u *unavailable
			if errors.As(err, &u) {
				what = u.what
			}
			log.Error("healthz: "+what+" unavailable", "err", err)
			http.Error(w, what+" unavailable", http.StatusServiceUnavailable)
			return
		}
		// "status" first, then the fields in a stable order.
		var b strings.Builder
		b.WriteString(`{"status":"ok"`)
		keys := make([]string, 0, len(fields))
		for k := range fields {
			if k != "status" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			kj, _ := json.Marshal(k)
			vj, err := json.Marshal(fields[k])
			if err != nil {
				log.Error("healthz: a field cannot be written", "field", k, "err", err)
				http.Error(w, "service unavailable", http.StatusServiceUnavailable)
				return
			}
			b.WriteByte(',')
			b.Write(kj)
			b.WriteByte(':')
			b.Write(vj)
		}
		b.WriteString("}\n")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(b.String()))
	}
}
