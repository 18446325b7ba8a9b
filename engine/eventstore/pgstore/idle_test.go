package pgstore

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/internal/testenv"
)

// A session that stalls inside a transaction is ended after the URL's
// idle_in_transaction_session_timeout, or DefaultIdleInTransaction
// without one: what bounds how long a stopped process holds the head's
// lock. Checked by asking a store session for the setting.
func TestIdleInTransactionFromTheURL(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	for _, c := range []struct{ url, want string }{
		{url, DefaultIdleInTransaction},
		{withParam(url, "idle_in_transaction_session_timeout=4s"), "4s"},
	} {
		s := openProcess(t, c.url, Options{MaxConns: 2})
		var got string
		if err := s.pool.QueryRow(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: idle_in_transaction_session_timeout %q, want %q", c.url, got, c.want)
		}
	}
	// And PostgreSQL ends such a session: the setting is what acts.
	conn, err := pgx.Connect(t.Context(), withParam(url, "idle_in_transaction_session_timeout=300ms"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := conn.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Fatal("a session idle in its transaction past the timeout was not ended")
	}
}
