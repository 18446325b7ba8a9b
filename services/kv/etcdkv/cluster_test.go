package etcdkv_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/etcdkv"
	"github.com/logbook/logbook/services/kv/kvtest"
)

// etcdScript is scripts/etcd.sh of the repository the test runs in.
func etcdScript(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "etcd.sh")
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// TestConformanceMemberKilled: the conformance suite passes on a
// three-member cluster while one member (a follower) is killed with
// SIGKILL and, seconds later, restarted from its data directory; after it
// the restarted member has caught up with the leader. With one member
// down every write needs both others (a quorum of two).
//
// The suite's client talks to the two other members. A client connected
// to the member that dies sees the requests in flight on it fail with
// kv.ErrUnavailable ("error reading from server: EOF"), which is the
// repository's contract — such a write may or may not have taken effect,
// and retrying a compare-and-set whose outcome is unknown is not safe —
// but which the suite, expecting every operation to succeed, counts as a
// failure.
func TestConformanceMemberKilled(t *testing.T) {
	eps := testenv.EtcdCluster(t)
	script := etcdScript(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The victim: a member that is not the leader.
	victim := -1
	for i, ep := range eps {
		st, err := c.Status(t.Context(), ep)
		if err != nil {
			t.Fatalf("member %d (%s) is not up before the test: %v", i+1, ep, err)
		}
		if st.Header.MemberId != st.Leader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no follower")
	}
	run := func(args ...string) {
		out, err := exec.Command(script, args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s %v: %v: %s", script, args, err, out)
		}
	}
	var killedAt, restartedAt atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(1500 * time.Millisecond)
		run("kill", "--members", "3", "--member", strconv.Itoa(victim+1))
		killedAt.Store(time.Now().UnixNano())
		time.Sleep(4 * time.Second)
		run("start", "--members", "3")
		restartedAt.Store(time.Now().UnixNano())
	}()
	defer func() { <-done }()

	open := func(t *testing.T) kv.Backend {
		p := make([]byte, 6)
		_, _ = rand.Read(p)
		prefix := "cluster-" + hex.EncodeToString(p) + "/"
		var others []string
		for i, ep := range eps {
			if i != victim {
				others = append(others, ep)
			}
		}
		b, err := etcdkv.Open(t.Context(), others, etcdkv.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.Delete(context.Background(), prefix, clientv3.WithPrefix()) })
		return b
	}
	start := time.Now()
	// Twice the usual contention and linear histories, so that the suite
	// is still running when the member dies and when it returns.
	kvtest.Run(t, open, kvtest.Options{ContendedUpdates: 80, LinearOps: 200})
	end := time.Now()
	<-done
	k, r := time.Unix(0, killedAt.Load()), time.Unix(0, restartedAt.Load())
	t.Logf("suite %v; member %d killed at +%v, restarted at +%v", end.Sub(start).Round(time.Millisecond), victim+1, k.Sub(start).Round(time.Millisecond), r.Sub(start).Round(time.Millisecond))
	if killedAt.Load() == 0 || k.After(end) {
		t.Fatalf("the member was not killed while the suite ran (killed at %v, suite ended %v)", k, end)
	}
	// The restarted member catches up: its applied index reaches the
	// leader's of a moment ago.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead, err := c.Status(ctx, eps[(victim+1)%len(eps)])
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := c.Status(ctx, eps[victim])
		if err == nil && st.RaftAppliedIndex >= lead.RaftAppliedIndex {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the restarted member did not catch up: %v, %+v", err, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
