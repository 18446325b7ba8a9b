package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
)

// pgClientTool finds a client program of the PostgreSQL install
// scripts/postgres.sh uses (Debian's, the newest version).
func pgClientTool(t *testing.T, name string) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	sort.Strings(found)
	if len(found) == 0 {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if testenv.Required() {
			t.Fatalf("%s not found (scripts/postgres.sh installs it)", name)
		}
		t.Skipf("%s not found", name)
	}
	return found[len(found)-1]
}

// TestPGDumpWhileAppending: a pg_dump of the store's schema taken while
// writers append is a consistent cut of the log. Restored into a fresh
// database, it holds a gap-free log up to some head H: every append
// acknowledged before the dump began is there, every acknowledged append
// at or below H whole, none in part, and logbook verify --store passes.
func TestPGDumpWhileAppending(t *testing.T) {
	pgDump, psql := pgClientTool(t, "pg_dump"), pgClientTool(t, "psql")
	dbURL, schema := testenv.URL(t), testenv.Schema(t)
	s, err := pgstore.Open(t.Context(), dbURL, pgstore.Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var (
		mu         sync.Mutex
		acks       []loadAck
		dumpCalled bool
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				stream := fmt.Sprintf("w%d-%d", w, i%5)
				evs := make([]eventstore.NewEvent, 1+i%3)
				for k := range evs {
					evs[k] = eventstore.NewEvent{Type: "Tick", Tags: []string{fmt.Sprintf("writer-%d", w)}, Data: []byte(fmt.Sprintf(`{"w":%d,"i":%d,"k":%d}`, w, i, k))}
				}
				res, err := s.Append(ctx, stream, eventstore.Any, evs)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("append: %v", err)
					}
					return
				}
				a := loadAck{stream: stream, first: res.FirstPosition}
				for _, e := range evs {
					a.ids = append(a.ids, e.ID)
				}
				mu.Lock()
				a.before = !dumpCalled
				acks = append(acks, a)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	dumpCalled = true
	mu.Unlock()
	dump := exec.CommandContext(t.Context(), pgDump, "--schema="+schema, "--no-owner", "--no-privileges", dbURL)
	var sql, stderr bytes.Buffer
	dump.Stdout, dump.Stderr = &sql, &stderr
	if err := dump.Run(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, stderr.String())
	}
	time.Sleep(200 * time.Millisecond) // appends go on after the dump
	cancel()
	wg.Wait()
	if t.Failed() {
		return
	}

	restoreURL := testenv.ScratchDatabase(t, dbURL)
	load := exec.CommandContext(t.Context(), psql, "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "--single-transaction", restoreURL)
	load.Stdin, load.Stdout, load.Stderr = &sql, &stderr, &stderr
	if err := load.Run(); err != nil {
		t.Fatalf("psql: %v: %s", err, stderr.String())
	}

	// logbook verify --store, the command, on the restored database.
	u, err := url.Parse(restoreURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	code, out, errOut := runCLI(t, "verify", "--store", u.String(), "--json")
	var v verifyJSON
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Problems) != 0 || v.Head == 0 {
		t.Fatalf("verify --store of the restored dump: %d %.2000s %s", code, out, errOut)
	}

	rs, err := pgstore.Open(t.Context(), restoreURL, pgstore.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if len(acks) == 0 || acks[0].ids[0] == (eventstore.ID{}) {
		t.Fatal("appends left their events without ids: nothing to compare")
	}
	head := v.Head
	checkBackupUnderLoad(t, logByPosition(t, rs), head, acks, true)
	if !strings.Contains(out, fmt.Sprintf(`"head":%d`, head)) {
		t.Fatalf("verify's head: %s", out)
	}
}
