package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
)

// dashboardFile is the Grafana dashboard over a node's metrics.
const dashboardFile = "../../docs/grafana/logbook-node.json"

// dashboard is what the test reads of the dashboard's JSON.
type dashboard struct {
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
		}
	}
	Panels []struct {
		Type, Title string
		Datasource  *struct{ Type, UID string }
		Targets     []struct {
			Expr       string
			Datasource *struct{ Type, UID string }
		}
	}
}

// readDashboard reads the dashboard and checks that it takes its
// Prometheus datasource from a variable, as an importable dashboard must.
// It returns every PromQL expression, by panel title.
func readDashboard(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		hasVar = hasVar || v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}
	if !hasVar {
		t.Errorf("%s: no datasource variable of type prometheus", dashboardFile)
	}
	exprs := map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, ds := range []*struct{ Type, UID string }{p.Datasource, tg.Datasource} {
				if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
					t.Errorf("panel %q: datasource %+v, want the variable ${datasource}", p.Title, ds)
				}
			}
			exprs[p.Title] = append(exprs[p.Title], tg.Expr)
		}
	}
	if len(exprs) == 0 {
		t.Fatalf("%s: no panels", dashboardFile)
	}
	return exprs
}

var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "atan2", "inf", "nan", "Inf", "NaN"}
)

// metricNames returns the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges and grouping
// clauses are cut out, that are neither keywords nor called (functions
// and aggregations are).
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.$") {
			continue // an exponent (1e3) or a variable
		}
		if slices.Contains(promKeywords, name) || strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(") {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (result) (rate(logbook_appends_total{job=~"$job", code=~"5.."}[$__rate_interval]))`:                                      "logbook_appends_total",
		`histogram_quantile(0.99, sum by (le, kind) (rate(logbook_command_seconds_bucket{x="a}b"}[5m])))`:                                "logbook_command_seconds_bucket",
		`(max by (job) (a_total) - max by (job) (b:c)) and on (job, instance) (d{e="1"} == 1e3) / ignoring(x) group_left(y) f offset 5m`: "a_total b:c d f",
		`go_goroutines`: "go_goroutines",
		`time() - process_start_time_seconds > bool 0`: "process_start_time_seconds",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("%s: %q, want %q", expr, got, want)
		}
	}
}

// exported returns the names of the series a node's /metrics answer
// holds (a histogram's _bucket, _sum and _count each).
func exported(t *testing.T, url, token string) map[string]bool {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/plain") // the text format
	c := http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("/metrics: %d %s", res.StatusCode, b)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// missing returns the names of want that a scrape of the node lacks,
// scraping again for a while: a labelled metric appears with its first
// observation, a collector with the component that registers it.
func missing(t *testing.T, url, token string, want []string) []string {
	t.Helper()
	var lack []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := exported(t, url, token)
		lack = lack[:0]
		for _, n := range want {
			if !got[n] {
				lack = append(lack, n)
			}
		}
		if len(lack) == 0 || time.Now().After(deadline) {
			return lack
		}
	}
}

// traffic makes a node observe what its labelled metrics count: a
// command (an append, a command outcome), a view query, a stream query
// (a backend read) and requests by route and status.
func traffic(t *testing.T, url string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	for _, r := range []struct{ method, path, token, body string }{
		{"POST", "/api/rotations", "planner-token", `{"id":"dashboard-1"}`},
		{"GET", "/api/validity", "viewer-token", ""},
		{"GET", "/queries/all", "viewer-token", ""},
		{"GET", "/api/validity", "", ""},
	} {
		req, _ := http.NewRequest(r.method, url+r.path, strings.NewReader(r.body))
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}

// Every metric the Grafana dashboard (docs/grafana/logbook-node.json)
// queries is exported by a running flights node: a renamed or removed
// metric would leave a panel silently empty. The Kafka publisher's
// metrics exist only on a node with a bus, so they are checked on one
// (when a broker is at hand) in the subtest.
func TestDashboardMetricsAreExported(t *testing.T) {
	exprs := readDashboard(t)
	var bus, rest []string
	for _, es := range exprs {
		for _, e := range es {
			for _, n := range metricNames(e) {
				switch {
				case slices.Contains(bus, n), slices.Contains(rest, n):
				case strings.HasPrefix(n, "logbook_bus_"):
					bus = append(bus, n)
				default:
					rest = append(rest, n)
				}
			}
		}
	}
	sort.Strings(bus)
	sort.Strings(rest)
	if len(rest) < 20 || len(bus) == 0 {
		t.Fatalf("the dashboard queries only %v and %v", rest, bus)
	}
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner")

	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel)
	traffic(t, url)
	if lack := missing(t, url, "viewer-token", rest); len(lack) > 0 {
		t.Errorf("the dashboard queries metrics a node does not export: %v", lack)
	}

	t.Run("kafka publisher", func(t *testing.T) {
		brokers := testenv.Kafka(t)
		var b [4]byte
		_, _ = rand.Read(b[:])
		topic := "logbook-dashboard-" + hex.EncodeToString(b[:])
		tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer tcancel()
		if err := kafkabus.EnsureTopic(tctx, kafkabus.Config{Brokers: brokers}, topic, 1, -1); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
			if err != nil {
				return
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = kadm.NewClient(cl).DeleteTopic(ctx, topic)
		})
		ctx, cancel := context.WithCancel(context.Background())
		url := startFlightsNode(t, ctx, cancel, "--bus", "kafka://"+strings.Join(brokers, ",")+"/"+topic)
		traffic(t, url)
		if lack := missing(t, url, "viewer-token", append(bus, rest...)); len(lack) > 0 {
			t.Errorf("the dashboard queries metrics a node with a bus does not export: %v", lack)
		}
	})
}

// startFlightsNode runs the flights server (`logbook serve`) in-process
// on its own embedded store, with the tokens of LOGBOOK_TOKENS and the
// extra flags given, until the test ends; cancel stops it early. It
// returns the node's base URL.
func startFlightsNode(t *testing.T, ctx context.Context, cancel context.CancelFunc, flags ...string) string {
	t.Helper()
	var stderr syncBuffer
	done := make(chan int, 1)
	args := append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--log-format", "json"}, flags...)
	go func() {
		done <- run(ctx, &env{stdout: &syncBuffer{}, stderr: &stderr, getenv: os.Getenv}, args)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "logbook serving" && l.URL != "" {
				return l.URL
			}
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d before serving: %s", code, stderr.String())
		default:
		}
	}
	t.Fatalf("no \"logbook serving\" line in the JSON log:\n%s", stderr.String())
	return ""
}
