package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify/userscdc"
)

func runNotifyUsers(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	code := run(context.Background(), &env{stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }},
		append([]string{"notify", "users", "generate"}, args...))
	return code, stderr.String()
}

// `logbook notify users generate` creates the users' tables in a schema
// and fills them: user i in club 1 + i mod K, every club's members
// counted as the notify service's view will count them; a second run
// into the filled tables is refused.
func TestNotifyUsersGenerate(t *testing.T) {
	url := testenv.URL(t)
	schema := testenv.Schema(t)
	code, stderr := runNotifyUsers(t, "--users-db", url, "--users-schema", schema, "--users", "60", "--clubs", "4", "--seed", "5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	ctx := context.Background()
	src, err := userscdc.OpenSource(ctx, url, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	users, err := src.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 60 {
		t.Fatalf("%d users, want 60", len(users))
	}
	rows, err := src.Pool.Query(ctx, "SELECT club_id, count(*) FROM "+src.Table("users")+" GROUP BY club_id ORDER BY club_id")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rows.Next() {
		var club, n int64
		if err := rows.Scan(&club, &n); err != nil {
			t.Fatal(err)
		}
		if club != int64(len(got)+1) {
			t.Fatalf("club %d after %d clubs", club, len(got))
		}
		got = append(got, n)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(got) != 4 || got[0] != 15 || got[1] != 15 || got[2] != 15 || got[3] != 15 {
		t.Fatalf("members per club %v, want 4 clubs of 15", got)
	}
	code, stderr = runNotifyUsers(t, "--users-db", url, "--users-schema", schema, "--users", "10")
	if code == 0 || !strings.Contains(stderr, "already holds 60 users") {
		t.Fatalf("a second run: exit %d, stderr %q", code, stderr)
	}
}

func TestNotifyUsersGenerateUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, `required flag(s) "users-db" not set`},
		{[]string{"--users-db", "mysql://x/y"}, "--users-db postgres://… is required"},
		{[]string{"--users-db", "postgres://x/y", "--users", "0"}, "--users and --clubs must be positive"},
		{[]string{"--users-db", "postgres://x/y", "--opt-out", "1.5"}, "--opt-out 1.5: want a share from 0 to 1"},
	} {
		code, stderr := runNotifyUsers(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}
