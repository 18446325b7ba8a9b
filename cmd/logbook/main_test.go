package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func TestHelpAndBadUsage(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	for _, cmd := range []string{"serve", "flights", "bench", "loadtest"} {
		if code != 0 || !strings.Contains(out, cmd) {
			t.Fatalf("help (%d) does not list %s:\n%s", code, cmd, out)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"bench", "nope"}, 2, `unknown bench command "nope"`},
		{[]string{"bench", "append", "--events", "-1"}, 2, "must be positive"},
		{[]string{"bench", "append", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"flights", "import"}, 2, "--ssim FILE is required"},
		{[]string{"flights", "import", "--ssim", "/no/such/file.ssim", "--data", t.TempDir()}, 1, "no such file"},
		{[]string{"flights", "generate"}, 2, "--out DIR is required"},
		{[]string{"flights", "generate", "--out", t.TempDir(), "--violations", "0.9"}, 2, "within 0–0.2"},
		{[]string{"loadtest", "read", "--url", "ftp://x", "--token", "t"}, 2, "want http://host:port"},
		{[]string{"serve", "--tokens", "/no/such/tokens"}, 1, "no such file"},
		{[]string{"serve", "extra-arg"}, 2, "unexpected arguments"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	t.Setenv("LOGBOOK_TOKENS", "")
	if code, _, stderr := runCLI(t, "serve", "--data", t.TempDir()); code != 2 || !strings.Contains(stderr, "no bearer tokens") {
		t.Errorf("serve without tokens: %d %q", code, stderr)
	}
}

// TestFlightsCommands runs generate, import, check and export as a user
// would, and checks that check reports what generate injected.
func TestFlightsCommands(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "gen")
	code, out, stderr := runCLI(t, "flights", "generate", "--out", gen, "--weeks", "2", "--flights-per-week", "900", "--violations", "0.02", "--json")
	if code != 0 {
		t.Fatalf("generate: %d %s", code, stderr)
	}
	var g struct {
		Legs                        float64 `json:"legs"`
		InjectedContinuity          float64 `json:"injected_continuity"`
		InjectedMinGroundTime       float64 `json:"injected_min_ground_time"`
		InjectedDuplicateDesignator float64 `json:"injected_duplicate_designator"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	code, out, stderr = runCLI(t, "flights", "import", "--data", data, "--ssim", filepath.Join(gen, "schedule.ssim"), "--rotations", filepath.Join(gen, "rotations.csv"), "--json")
	if code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	var imp map[string]any
	if err := json.Unmarshal([]byte(out), &imp); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"records", "flight_leg_records", "dated_legs", "rejected", "rotations", "seconds"} {
		if _, ok := imp[k]; !ok {
			t.Fatalf("import --json lacks %q: %s", k, out)
		}
	}
	if imp["dated_legs"].(float64) != g.Legs || imp["rejected"].(float64) != 0 {
		t.Fatalf("import %s, generated %v legs", out, g.Legs)
	}
	code, out, stderr = runCLI(t, "flights", "check", "--data", data, "--json")
	if code != 0 {
		t.Fatalf("check: %d %s", code, stderr)
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c["legs"].(float64) != g.Legs || c["continuity"].(float64) != g.InjectedContinuity ||
		c["min_ground_time"].(float64) != g.InjectedMinGroundTime || c["duplicate_designator"].(float64) != g.InjectedDuplicateDesignator {
		t.Fatalf("check %s, generate %v", out, g)
	}
	if g.InjectedContinuity == 0 || g.InjectedDuplicateDesignator == 0 {
		t.Fatalf("nothing injected: %+v", g)
	}
	if code, out, stderr := runCLI(t, "flights", "export", "--data", data, "--out", filepath.Join(dir, "exp")); code != 0 || !strings.Contains(out, "exported") {
		t.Fatalf("export: %d %s %s", code, out, stderr)
	}
	// A malformed record: reported with its line on stderr, the rest
	// imported; --strict stops at it with a non-zero exit.
	sched, _ := os.ReadFile(filepath.Join(gen, "schedule.ssim"))
	lines := strings.Split(string(sched), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "3") {
			lines[i] = l[:28] + "1X34567" + l[35:]
			break
		}
	}
	bad := filepath.Join(dir, "bad.ssim")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "flights", "import", "--data", filepath.Join(dir, "d2"), "--ssim", bad)
	if code != 0 || !strings.Contains(stderr, "rejected: line") || !strings.Contains(stderr, "days of operation") {
		t.Fatalf("lenient import of a bad record: %d %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "flights", "import", "--strict", "--data", filepath.Join(dir, "d3"), "--ssim", bad)
	if code != 1 || !strings.Contains(stderr, "days of operation") {
		t.Fatalf("strict import of a bad record: %d %q", code, stderr)
	}
}
