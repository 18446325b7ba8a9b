package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{stdout: &out, stderr: &errb, getenv: os.Getenv}, args)
	return code, out.String(), errb.String()
}

func TestHelpAndBadUsage(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	for _, cmd := range []string{"flights", "tickets", "notify", "kv", "bench", "loadtest"} {
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
		{[]string{"bench", "nope"}, 2, `unknown command "nope" for "logbook bench"`},
		{[]string{"bench", "apend"}, 2, "did you mean append?"},
		{[]string{"bench"}, 2, "which bench command? (append, cdc, commands, crush, kv, notify, peers, produce, read, registry, scaling, tickets, windows)"},
		{[]string{"bench", "append", "--events", "-1"}, 2, "must be positive"},
		{[]string{"bench", "append", "--events", "many"}, 2, `invalid argument "many" for "--events"`},
		{[]string{"bench", "append", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"bench", "append", "--ceiling", "--store", "postgres://x/y"}, 2, "--ceiling is for the embedded store"},
		{[]string{"bench", "read", "--cpuprofile", "/no/such/dir/cpu.prof"}, 1, "no such file"},
		{[]string{"flights", "import"}, 2, `required flag(s) "ssim" not set`},
		{[]string{"flights", "import", "--ssim", "/no/such/file.ssim", "--data", t.TempDir()}, 1, "no such file"},
		{[]string{"flights", "generate"}, 2, `required flag(s) "out" not set`},
		{[]string{"flights", "generate", "--out", t.TempDir(), "--violations", "0.9"}, 2, "within 0–0.2"},
		{[]string{"loadtest", "read", "--url", "ftp://x", "--token", "t"}, 2, "want http://host:port"},
		{[]string{"loadtest", "write", "--url", "http://x", "--token", "t", "--plot", "chart.pdf"}, 2, ".svg or .png"},
		{[]string{"loadtest", "write", "--url", "https://x", "--token", "t", "--ceiling"}, 2, "--ceiling is plain HTTP"},
		{[]string{"--log-format", "xml", "version"}, 2, "want text or json"},
		{[]string{"--log-level", "loud", "version"}, 2, "want debug, info, warn or error"},
		{[]string{"flights", "serve", "--read-only", "--commands-only", "--store", "postgres://x/y"}, 2, "none of the others can be; [commands-only read-only] were all set"},
		{[]string{"flights", "serve", "--read-only", "--replica-of", "http://x", "--replica-token", "t"}, 2, "none of the others can be; [read-only replica-of] were all set"},
		{[]string{"flights", "serve", "--commands-only"}, 2, "need a shared --store"},
		{[]string{"flights", "serve", "--replica-of", "http://x"}, 2, "--replica-of needs --replica-token"},
		{[]string{"flights", "serve", "--bus", "http://x"}, 2, "--bus"},
		{[]string{"flights", "serve", "--max-conns", "0"}, 2, "--max-conns must be positive"},
		{[]string{"flights", "serve", "--aggregate-cache-mib", "0"}, 2, "--aggregate-cache-mib 0: want 1 to 1048576"},
		{[]string{"torture", "--crash-points", "0"}, 2, "--crash-points must be positive"},
		{[]string{"torture", "--store-kind", "disk"}, 2, "want events or projection"},
		{[]string{"torture", "--crash-points", "5", "--no-sync"}, 1, "acknowledged appends lost"},
		{[]string{"flights", "serve", "--bus-format", "avro"}, 2, "--bus-format avro needs a --bus"},
		{[]string{"flights", "serve", "--bus", "kafka://h:1/t", "--bus-format", "xml"}, 2, "want logbook or avro"},
		{[]string{"flights", "serve", "--tokens", "/no/such/tokens"}, 1, "no such file"},
		{[]string{"flights", "serve", "extra-arg"}, 2, "unexpected arguments"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.msg)
		}
		if code == 2 && !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("%v: a usage error should point to the help: %q", c.args, stderr)
		}
	}
	t.Setenv("LOGBOOK_TOKENS", "")
	if code, _, stderr := runCLI(t, "flights", "serve", "--data", t.TempDir()); code != 2 || !strings.Contains(stderr, "no bearer tokens") {
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

// TestHelp checks that help is generated from the flags, printed on
// stdout, and exits 0, however it is asked for.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"flights", "cluster", "flights", "bench", "loadtest", "version", "completion", "--log-format"}},
		{[]string{"--help"}, []string{"flights", "bench"}},
		{[]string{"flights", "--help"}, []string{"serve", "generate", "import", "check", "export"}},
		{[]string{"help", "bench"}, []string{"append", "commands", "crush", "read", "--cpuprofile"}},
		{[]string{"bench", "append", "--help"}, []string{"--events", "--writers", "--store-ids", "--json", "-o, --output", "table, json, csv", "--cpuprofile", "--data", "(env LOGBOOK_STORE)", "--log-level"}},
		{[]string{"bench", "crush", "-h"}, []string{"--max-concurrent-queries", "--poll", "--refresh-interval"}},
		{[]string{"flights", "serve", "--help"}, []string{"--replica-of", "--replica-token", "--debug-addr", "(env LOGBOOK_ADDR)", "(env LOGBOOK_BUS)", "LOGBOOK_TOKENS"}},
		{[]string{"flights", "generate", "--help"}, []string{"--seed", "--violations", "--out"}},
		{[]string{"loadtest", "read", "--help"}, []string{"--rate", "--query", "--conns", "--batch-delay", "--plot", "(env LOGBOOK_URL)", "(env LOGBOOK_TOKEN)"}},
	} {
		code, out, stderr := runCLI(t, c.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help on stdout lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}

// TestEnvironmentFallback checks the order: a flag on the command line,
// else its LOGBOOK_ variable, else the default.
func TestEnvironmentFallback(t *testing.T) {
	t.Setenv("LOGBOOK_URL", "")
	t.Setenv("LOGBOOK_TOKEN", "")
	if code, _, stderr := runCLI(t, "loadtest", "read"); code != 2 || !strings.Contains(stderr, `required flag(s) "token", "url" not set`) {
		t.Fatalf("no flag, no variable: %d %q", code, stderr)
	}
	t.Setenv("LOGBOOK_URL", "ftp://from-env")
	t.Setenv("LOGBOOK_TOKEN", "secret")
	if code, _, stderr := runCLI(t, "loadtest", "read"); code != 2 || !strings.Contains(stderr, `"ftp://from-env"`) {
		t.Fatalf("the variable should be used without the flag: %d %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "loadtest", "read", "--url", "ftp://from-flag"); code != 2 || !strings.Contains(stderr, `"ftp://from-flag"`) {
		t.Fatalf("the flag should win over the variable: %d %q", code, stderr)
	}
	t.Setenv("LOGBOOK_STORE", "mysql://from-env")
	if code, _, stderr := runCLI(t, "flights", "check"); code != 2 || !strings.Contains(stderr, `--store "mysql://from-env"`) {
		t.Fatalf("LOGBOOK_STORE: %d %q", code, stderr)
	}
}

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_logbook",
		"zsh":  "#compdef logbook",
		"fish": "complete -c logbook",
	} {
		code, out, stderr := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q, output lacks %q", shell, code, stderr, want)
		}
	}
	// The completion script asks the binary; the binary answers with the
	// commands and flags it has.
	code, out, _ := runCLI(t, "__complete", "bench", "")
	if code != 0 || !strings.Contains(out, "append") || !strings.Contains(out, "crush") {
		t.Errorf("completing `logbook bench `: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "__complete", "loadtest", "read", "--ra")
	if code != 0 || !strings.Contains(out, "--ramp") || !strings.Contains(out, "--rate") {
		t.Errorf("completing `logbook loadtest read --ra`: %d %q", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, stderr := runCLI(t, "version", "--json")
	if code != 0 {
		t.Fatalf("version: %d %s", code, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version --json: %v: %s", err, out)
	}
	if v["module"] != "github.com/logbook/logbook" || v["go"] != runtime.Version() || v["version"] == "" {
		t.Errorf("version --json: %s", out)
	}
	code, out, _ = runCLI(t, "version")
	if code != 0 || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "commit") {
		t.Errorf("version: %d %s", code, out)
	}
}

// TestNoProgressWhenNotATerminal runs a benchmark with its outputs going
// to buffers: the result, and nothing drawn around it.
func TestNoProgressWhenNotATerminal(t *testing.T) {
	code, out, stderr := runCLI(t, "bench", "append", "--data", t.TempDir(), "--events", "2000", "--batch", "10", "--streams", "10")
	if code != 0 || stderr != "" {
		t.Fatalf("bench append: %d, stderr %q", code, stderr)
	}
	if !strings.Contains(out, "events/s") {
		t.Fatalf("bench append printed no table: %q", out)
	}
	dir := t.TempDir()
	code, out, stderr = runCLI(t, "bench", "append", "--data", dir, "--events", "2000", "--batch", "1", "--writers", "8", "--ceiling", "-o", "json")
	var r struct {
		Ceiling *float64 `json:"ceiling_events_per_sec"`
		Ratio   *float64 `json:"ratio_to_ceiling"`
	}
	if code != 0 || stderr != "" || json.Unmarshal([]byte(out), &r) != nil || r.Ceiling == nil || *r.Ceiling <= 0 || r.Ratio == nil || *r.Ratio <= 0 {
		t.Fatalf("bench append --ceiling: %d %q %q", code, out, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "log-ceiling-*")); len(left) != 0 {
		t.Errorf("--ceiling left its log: %v", left)
	}
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	code, out, stderr = runCLI(t, "bench", "read", "--data", t.TempDir(), "--json", "--cpuprofile", prof)
	if code != 0 || stderr != "" || !json.Valid([]byte(out)) {
		t.Fatalf("bench read --json: %d %q %q", code, out, stderr)
	}
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		t.Fatalf("--cpuprofile wrote no profile: %v", err)
	}
}

// syncBuffer is a buffer a server's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeLogsAndMeasuresRequests runs `logbook flights serve` with JSON logs,
// sends it requests, and finds each in the access log and in the HTTP
// metrics, by route pattern; then stops it as a signal would.
func TestServeLogsAndMeasuresRequests(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
	t.Setenv("LOGBOOK_ADDR", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	debugAddr := l.Addr().String()
	l.Close()
	go func() {
		done <- run(ctx, &env{stdout: &stdout, stderr: &stderr, getenv: os.Getenv},
			[]string{"flights", "serve", "--data", t.TempDir(), "--log-format", "json", "--debug-addr", debugAddr})
	}()
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == "" && time.Now().Before(deadline); {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "logbook serving" {
				url = l.URL
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if url == "" {
		t.Fatalf("no \"logbook serving\" line in the JSON log:\n%s", stderr.String())
	}
	status := 0
	get := func(path, token string) string {
		req, _ := http.NewRequest("GET", url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		status = res.StatusCode
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	get("/healthz", "")
	get("/api/validity", "viewer-token")
	get("/api/validity", "")
	// /metrics needs a token of any role (a scraper sends it); /healthz
	// none.
	if get("/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", status)
	}
	m := get("/metrics", "viewer-token")
	// The pprof listener asks for a token too (review finding L7).
	{
		for _, c := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {"viewer-token", http.StatusOK}} {
			req, _ := http.NewRequest("GET", "http://"+debugAddr+"/debug/pprof/", nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.want {
				t.Errorf("pprof with token %q: %d, want %d", c.token, res.StatusCode, c.want)
			}
		}
	}
	for _, want := range []string{
		`logbook_http_requests_total{code="200",route="GET /healthz"} 1`,
		// The flights API's own pattern, from its mux inside the node's.
		`logbook_http_requests_total{code="200",route="GET /api/validity"} 1`,
		`logbook_http_requests_total{code="401",route=`,
		`logbook_http_request_duration_seconds_bucket{code="200",route="GET /healthz"`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, stderr.String())
	}
	var access []map[string]any
	for _, line := range strings.Split(stderr.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "http request" {
			access = append(access, l)
		}
	}
	if len(access) < 3 || access[0]["route"] != "GET /healthz" || access[0]["status"] != float64(200) ||
		access[0]["method"] != "GET" || access[0]["bytes"].(float64) == 0 || access[2]["status"] != float64(401) {
		t.Fatalf("access log %v", access)
	}
}

// TestAggregateCacheFlag: --aggregate-cache-mib reaches the write node's
// aggregate runtimes, and the default is the engine's 32 MiB.
func TestAggregateCacheFlag(t *testing.T) {
	for _, c := range []struct {
		mib  int
		want int64
	}{{32, 32 << 20}, {512, 512 << 20}} {
		tokens := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(tokens, []byte("planner-token-1 planner\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f := serveFlags{addr: "127.0.0.1:0", maxConns: 10, cacheMiB: c.mib, tokens: tokenFlags{file: tokens}}
		cfg, err := f.parse(context.Background(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		n := &node{cfg: cfg}
		if got := n.writerOptions(true).Aggregates.CacheBytes; got != c.want {
			t.Errorf("--aggregate-cache-mib %d: the runtimes' CacheBytes = %d, want %d", c.mib, got, c.want)
		}
	}
}
