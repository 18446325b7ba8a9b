package nemesis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
)

// needs ends the test unless PostgreSQL's binaries, nginx, java and the
// broker's jars are here (scripts/test.sh provides them all); it fails
// instead with LOGBOOK_REQUIRE_EXTERNAL=1.
func needs(t *testing.T) (libs, nginx string) {
	t.Helper()
	nginx = testenv.Nginx(t)
	end := func(err error) {
		if testenv.Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(dirs) == 0 {
		end(os.ErrNotExist)
	}
	if _, err := exec.LookPath("java"); err != nil {
		end(err)
	}
	libs, err := KafkaLibs("")
	if err != nil {
		end(err)
	}
	return libs, nginx
}

// buildBinary builds the logbook command once for the package's tests.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.Do(func() {
		dir, err := os.MkdirTemp("", "logbook-nemesis-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.bin = filepath.Join(dir, "logbook")
		if out, err := exec.Command("go", "build", "-o", built.bin, "github.com/logbook/logbook/cmd/logbook").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

var built struct {
	sync.Once
	bin string
	err error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.bin != "" {
		os.RemoveAll(filepath.Dir(built.bin))
	}
	os.Exit(code)
}

func logsOnFailure(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "cluster", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		t.Logf("%s:\n%s", filepath.Base(f), tail(string(b), 3000))
	}
}

// TestNemesis is the bounded run: every fault kind at least twice, the
// six lanes overlapping, under the flights and kv workloads, and every
// check holds.
func TestNemesis(t *testing.T) {
	libs, nginx := needs(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	defer logsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Config{Binary: bin, Nginx: nginx, KafkaLibs: libs, Dir: dir, Seed: 11,
		Duration: 45 * time.Second, Rounds: 2, MinRounds: 2, Hold: time.Second, Quiet: time.Second, Clients: 3,
		Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations, %d writes acknowledged, faults %v, max recovery %.2f s", sum.Operations, sum.Acknowledged, sum.Faults, sum.MaxRecoveryS)
	for _, v := range sum.Violations {
		t.Error(v)
	}
	for _, k := range Kinds() {
		if sum.Faults[k] < 2 {
			t.Errorf("fault %s injected %d times, want at least 2", k, sum.Faults[k])
		}
	}
	// The ten-minute run's floor is 10 s; this bound only catches a
	// cluster that recovers far slower than it should.
	if sum.MaxRecoveryS > 20 {
		t.Errorf("max recovery %.2f s", sum.MaxRecoveryS)
	}
	if sum.Acknowledged < 50 || sum.LostAcknowledged != 0 || sum.DuplicateEffects != 0 || !sum.ReplicasConverged ||
		sum.KafkaGaps != 0 || sum.KafkaDuplicates != 0 || sum.Linearizable == nil || !*sum.Linearizable {
		t.Errorf("summary %+v", sum.JSON())
	}
}

// TestNemesisCatchesASkippingReplica plants a bug — the HTTP-fed
// replica's feed drops an event now and then — and checks that the
// nemesis says the replicas did not converge: the checks can fail.
func TestNemesisCatchesASkippingReplica(t *testing.T) {
	libs, nginx := needs(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Config{Binary: bin, Nginx: nginx, KafkaLibs: libs, Dir: dir, Seed: 3,
		Duration: 15 * time.Second, Kinds: []string{"kill-writer"}, Hold: time.Second, Quiet: time.Second, Clients: 3,
		ConvergeWithin: 15 * time.Second, Plant: "skip-event"})
	if err != nil {
		t.Fatal(err)
	}
	var checks []string
	for _, v := range sum.Violations {
		checks = append(checks, v.Check)
		t.Log(v)
	}
	sort.Strings(checks)
	if sum.ReplicasConverged || !strings.Contains(strings.Join(checks, " "), "replicas-converged") {
		t.Fatalf("a replica skipping events went unseen: converged %v, violations %v", sum.ReplicasConverged, checks)
	}
	if sum.LostAcknowledged != 0 || sum.KafkaGaps != 0 {
		t.Errorf("only the replica is broken, yet lost %d, gaps %d", sum.LostAcknowledged, sum.KafkaGaps)
	}
}
