package pgstore

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/internal/testenv"
)

// An application_name in the URL names the store's sessions, so that an
// operator (or a fault test) can tell the processes sharing a database
// apart in pg_stat_activity; without one they are named "logbook".
func TestApplicationNameFromTheURL(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	s := openProcess(t, withParam(url, "application_name=logbook-writer-7"), Options{MaxConns: 2})
	if _, err := s.Head(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'logbook-writer-7'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no session named by the URL's application_name")
	}
}
