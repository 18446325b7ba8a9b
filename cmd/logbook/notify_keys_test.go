package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/internal/testenv"
)

// copyTree copies a closed keyring's directory: its backup, or its
// restore.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// runKeys runs `logbook notify keys …` with the master key in the
// environment; it returns the exit code, stdout and stderr.
func runKeys(t *testing.T, master string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == shred.MasterKeyEnv {
			return master
		}
		return ""
	}
	code := run(context.Background(), &env{stdout: &out, stderr: &errb, getenv: getenv}, append([]string{"notify", "keys"}, args...))
	return code, out.String(), errb.String()
}

// TestNotifyKeysReforget: a keyring restored from a backup taken before
// a user was forgotten opens the user's field again; `notify keys
// reforget --from` an export of the audit stream (`notify keys
// export-audit`) closes it again, leaves the other user's open, and a
// second run finds nothing to do; so does reforget from the store's own
// audit stream. Bad input is exit 2 with a message, and changes nothing.
func TestNotifyKeysReforget(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data, keys, backup, export := filepath.Join(dir, "data"), filepath.Join(dir, "keys"), filepath.Join(dir, "keys-backup"), filepath.Join(dir, "audit.ndjson")
	masterHex := shred.NewMasterKey()
	master, err := shred.ParseMasterKey(masterHex)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pebblestore.Open(data, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	open := func() *shred.Keyring {
		t.Helper()
		k, err := shred.OpenDir(ctx, keys, master, shred.DirOptions{Options: shred.Options{Audit: st}})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := open()
	a, err := k.SealField(ctx, "user/1", "name", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.SealField(ctx, "user/2", "name", "Bea")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	copyTree(t, keys, backup) // the keyring's backup, before the forgetting
	k = open()
	if _, err := k.Forget(ctx, "user/1", "test"); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := runKeys(t, masterHex, "export-audit", "--data", data, "--out", export, "-o", "json")
	var exp struct {
		Events int `json:"events"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &exp) != nil || exp.Events != 1 {
		t.Fatalf("export-audit: exit %d, %q, %s; want 1 event", code, out, stderr)
	}
	if fi, err := os.Stat(export); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export: %v, %v; want mode 0600", fi, err)
	}
	exported, _ := os.ReadFile(export)
	if !bytes.Contains(exported, []byte(shred.SubjectHashOf(master, "user/1"))) || bytes.Contains(exported, []byte("user/1")) {
		t.Fatalf("export should name the user by their keyed hash only:\n%s", exported)
	}

	// opens says whether user 1's and user 2's fields open in the
	// keyring's directory.
	opens := func() (bool, bool) {
		t.Helper()
		k, err := shred.OpenDir(ctx, keys, master, shred.DirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		_, errA := a.Open(ctx, k)
		if errA != nil && !errors.Is(errA, shred.ErrForgotten) {
			t.Fatal(errA)
		}
		v, errB := b.Open(ctx, k)
		if errB != nil && !errors.Is(errB, shred.ErrForgotten) {
			t.Fatal(errB)
		}
		return errA == nil, errB == nil && v == "Bea"
	}
	if a, b := opens(); a || !b {
		t.Fatalf("before the restore: user 1 opens %v, user 2 %v", a, b)
	}
	reforget := func(want int, args ...string) {
		t.Helper()
		code, out, stderr := runKeys(t, masterHex, append([]string{"reforget", "--keys", keys, "-o", "json"}, args...)...)
		var res struct {
			Reforgotten int `json:"reforgotten"`
			AuditEvents int `json:"audit_events"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Reforgotten != want || res.AuditEvents != 1 {
			t.Fatalf("reforget %v: exit %d, %q, %s; want %d re-forgotten of 1 audit event", args, code, out, stderr, want)
		}
	}

	for _, src := range [][]string{{"--from", export}, {"--data", data}} {
		copyTree(t, backup, keys) // restored from before the forgetting
		if a, b := opens(); !a || !b {
			t.Fatalf("restored keyring: user 1 opens %v, user 2 %v; both should", a, b)
		}
		reforget(1, src...)
		if a, b := opens(); a || !b {
			t.Fatalf("after reforget %v: user 1 opens %v (want closed), user 2 %v", src, a, b)
		}
		reforget(0, src...)
	}

	// From the Kafka topic the log was published to.
	if os.Getenv("LOGBOOK_TEST_KAFKA") != "" || testenv.Required() {
		broker := testenv.Kafka(t)[0]
		topic := fmt.Sprintf("logbook-reforget-%d", time.Now().UnixNano())
		st, err := pebblestore.Open(data, pebblestore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		h, err := st.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		p := kafkabus.NewPublisher(st, kafkabus.PublisherConfig{Config: kafkabus.Config{Brokers: []string{broker}}, Topic: topic, TransactionalID: topic, Partitions: 1})
		done := make(chan error, 1)
		go func() { done <- p.Run(pctx) }()
		for deadline := time.Now().Add(30 * time.Second); p.LastPosition() < h; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the publisher did not reach the head %d", h)
			}
		}
		cancel()
		<-done
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		copyTree(t, backup, keys)
		reforget(1, "--bus", "kafka://"+broker+"/"+topic)
		if a, b := opens(); a || !b {
			t.Fatalf("after reforget --bus: user 1 opens %v (want closed), user 2 %v", a, b)
		}
		reforget(0, "--bus", "kafka://"+broker+"/"+topic)
	}

	// Bad input: exit 2, a message, and the restored key left alone.
	copyTree(t, backup, keys)
	emptyDir := t.TempDir()
	bad := filepath.Join(dir, "bad.ndjson")
	good := strings.TrimSpace(string(exported))
	for _, c := range []struct {
		name, file string
		args       []string
		master     string
		want       string
	}{
		{"not JSON", "{\"stream\": \"logbook-audit\"\nnonsense\n", nil, masterHex, "line 1"},
		{"bad hash", strings.Replace(good, shred.SubjectHashOf(master, "user/1"), "abc", 1) + "\n", nil, masterHex, "subject_hash"},
		{"bad type", good + "\n" + strings.Replace(good, shred.TypeSubjectForgotten, "Other", 1) + "\n", nil, masterHex, "line 2"},
		{"no keys", good, []string{"reforget", "--from", bad}, masterHex, "--keys"},
		{"two sources", good, []string{"--bus", "kafka://127.0.0.1:1/t"}, masterHex, "--from and --bus"},
		{"no master key", good, nil, "", "master key"},
		{"bad master key", good, nil, "00", "master"},
		{"missing keyring", good, []string{"reforget", "--keys", filepath.Join(dir, "nowhere"), "--from", bad}, masterHex, "nowhere"},
		// A directory that exists but holds no keyring (the state
		// directory instead of its keys/) is refused, not taken for an
		// empty keyring with nothing to re-forget.
		{"a directory with no keyring", good, []string{"reforget", "--keys", emptyDir, "--from", bad}, masterHex, "no keyring"},
	} {
		if err := os.WriteFile(bad, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		args := c.args
		if len(args) == 0 || args[0] != "reforget" {
			args = append([]string{"reforget", "--keys", keys, "--from", bad}, args...)
		}
		code, _, stderr := runKeys(t, c.master, args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %q; want 2 and a message naming %q", c.name, code, stderr, c.want)
		}
	}
	if a, _ := opens(); !a {
		t.Errorf("a refused reforget closed user 1's key")
	}
	if code, _, stderr := runKeys(t, masterHex, "export-audit", "--data", data); code != 2 || !strings.Contains(stderr, "--out") {
		t.Errorf("export-audit without --out: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runKeys(t, masterHex, "export-audit", "--data", filepath.Join(dir, "nowhere"), "--out", bad); code != 2 || !strings.Contains(stderr, "nowhere") {
		t.Errorf("export-audit of a missing store: exit %d, %q", code, stderr)
	}
}
