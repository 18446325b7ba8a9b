package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPepaCommands(t *testing.T) {
	model := "../../lab/pepa/models/shared_queue.pepa"
	code, out, stderr := runCLI(t, "pepa", "solve", model, "--set", "a=10", "--json")
	if code != 0 {
		t.Fatalf("solve: %d %s", code, stderr)
	}
	var solved struct {
		States      int                           `json:"states"`
		Transitions int                           `json:"transitions"`
		Residual    float64                       `json:"residual"`
		Seconds     float64                       `json:"seconds"`
		Throughput  map[string]float64            `json:"throughput"`
		Utilisation map[string]map[string]float64 `json:"utilisation"`
	}
	if err := json.Unmarshal([]byte(out), &solved); err != nil {
		t.Fatal(err)
	}
	if solved.States != 66 || solved.Transitions != 220 || solved.Residual > 1e-10 || solved.Seconds <= 0 {
		t.Errorf("solve: %+v", solved)
	}
	if x := solved.Throughput["cycling"]; x < 0.495 || x >= 0.505 {
		t.Errorf("cycling throughput %g, Shephard's Table 1 prints 0.5", x)
	}
	if u := solved.Utilisation["Q_0"]["Q_A"]; u < 0.5 || u > 1 {
		t.Errorf("utilisation of Q_A %g", u)
	}

	code, out, stderr = runCLI(t, "pepa", "sweep", model, "--param", "a", "--from", "1", "--to", "10", "--step", "1", "--actions", "athletics,cycling", "--json")
	if code != 0 {
		t.Fatalf("sweep: %d %s", code, stderr)
	}
	var swept struct {
		Param string               `json:"param"`
		Rows  []map[string]float64 `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &swept); err != nil {
		t.Fatal(err)
	}
	if swept.Param != "a" || len(swept.Rows) != 10 || swept.Rows[3]["a"] != 4 || len(swept.Rows[3]) != 3 {
		t.Fatalf("sweep: %+v", swept)
	}
	for _, csvFlag := range [][]string{{"-o", "csv"}, {"--csv"}} {
		code, out, _ = runCLI(t, append([]string{"pepa", "sweep", model, "--param", "a", "--from", "4", "--to", "5", "--actions", "athletics,cycling"}, csvFlag...)...)
		if lines := strings.Split(out, "\n"); code != 0 || len(lines) != 4 || lines[0] != "a,athletics,cycling" || !strings.HasPrefix(lines[1], "4,3.899") || !strings.HasPrefix(lines[2], "5,4.534") {
			t.Errorf("sweep %v: %d\n%s", csvFlag, code, out)
		}
	}
	code, out, _ = runCLI(t, "pepa", "sweep", model, "--param", "a", "--from", "10", "--to", "10")
	if code != 0 || !strings.Contains(out, "5.00     0.50") {
		t.Errorf("sweep text: %d\n%s", code, out)
	}

	code, out, stderr = runCLI(t, "pepa", "ode", model, "--set", "a=10", "--set", "n=20000", "--json")
	if code != 0 || !strings.Contains(out, `"converged": true`) {
		t.Errorf("ode: %d %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "pepa", "ode", model, "--set", "a=5", "--set", "n=20", "--method", "closure", "--json")
	if code != 0 || !strings.Contains(out, `"method": "closure"`) || !strings.Contains(out, `"variances"`) || !strings.Contains(out, `"athletics": 4.79`) {
		t.Errorf("ode --method closure: %d %s %s", code, out, stderr)
	}
	code, csvOut, _ := runCLI(t, "pepa", "sim", model, "--seed", "3", "--time", "2000", "-o", "csv")
	if lines := strings.Split(csvOut, "\n"); code != 0 || lines[0] != "action,throughput,half_width_95" || len(lines) < 3 {
		t.Errorf("sim -o csv: %d\n%s", code, csvOut)
	}
	code, out, stderr = runCLI(t, "pepa", "sim", model, "--seed", "3", "--time", "2000", "--json")
	if code != 0 || !strings.Contains(out, `"half_width"`) {
		t.Errorf("sim: %d %s %s", code, out, stderr)
	}
}

func TestPepaErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.pepa")
	os.WriteFile(bad, []byte("r = 1;\nP = (a, r).Q;\nP\n"), 0o644)
	model := "../../lab/pepa/models/shared_queue.pepa"
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"pepa"}, 2, "which pepa command?"},
		{[]string{"pepa", "solve"}, 2, "which model?"},
		{[]string{"pepa", "solve", bad}, 1, "bad.pepa:2:12: process Q is not defined (used in P)"},
		{[]string{"pepa", "solve", "/no/such.pepa"}, 1, "no such file"},
		{[]string{"pepa", "solve", model, "--set", "zz=1"}, 1, `no rate named "zz"`},
		{[]string{"pepa", "solve", model, "--set", "a"}, 2, "want name=value"},
		{[]string{"pepa", "solve", model, "extra"}, 2, "unexpected arguments: extra"},
		{[]string{"pepa", "sweep", model}, 2, `required flag(s) "param" not set`},
		{[]string{"pepa", "sweep", model, "--param", "a", "--step", "0"}, 2, "the step must be positive"},
		{[]string{"pepa", "sweep", model, "--param", "a", "--actions", "nope"}, 2, `no action "nope"`},
		{[]string{"pepa", "sweep", model, "--param", "a", "--csv", "--json"}, 2, "none of the others can be"},
		{[]string{"pepa", "sweep", model, "--param", "a", "-o", "xml"}, 2, `"xml": want table, json, csv`},
		{[]string{"pepa", "solve", model, "-o", "csv"}, 2, `"csv": want table, json`},
		{[]string{"pepa", "sim", model, "--batches", "1"}, 2, "--batches at least 2"},
		{[]string{"pepa", "ode", model, "--method", "euler"}, 2, "implicit, rk4 or closure"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}

// sweep --plot draws the sweep: one line per action, in an SVG whose
// legend names them.
func TestPepaSweepPlot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sweep.svg")
	code, _, stderr := runCLI(t, "pepa", "sweep", "../../lab/pepa/models/shared_queue.pepa", "--param", "a", "--from", "1", "--to", "5", "--actions", "athletics,cycling", "--plot", file)
	if code != 0 {
		t.Fatalf("sweep --plot: %d %s", code, stderr)
	}
	svg, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "athletics", "cycling", "shared_queue.pepa"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the figure lacks %q", want)
		}
	}
	if code, _, _ := runCLI(t, "pepa", "sweep", "../../lab/pepa/models/shared_queue.pepa", "--param", "a", "--plot", "x.gif"); code != 2 {
		t.Errorf("--plot x.gif: exit %d, want 2", code)
	}
}

// pepa predict reads a loadtest tickets run, prints measured against
// predicted per sport and step, writes the calibrated model, and refuses
// what is not a run.
func TestPepaPredict(t *testing.T) {
	dir := t.TempDir()
	run := `{"arch":"queue","node_rate":100,"workers":16,"sports":["athletics","cycling","diving"],
	  "placement":{"athletics":["db1"],"cycling":["db2"],"diving":["db3"]},
	  "steps":[{"multiplier":10,"offered":{"athletics":200,"cycling":20,"diving":20,"control":20},
	    "throughput":{"athletics":99,"cycling":10.2,"diving":9.8,"control":10.1},
	    "node_service_rate":{"db1":100,"db2":100,"db3":100}}]}`
	path := filepath.Join(dir, "run.json")
	if err := os.WriteFile(path, []byte(run), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "queue.pepa")
	code, out, stderr := runCLI(t, "pepa", "predict", path, "--write-model", model)
	if code != 0 {
		t.Fatalf("predict: %d %s", code, stderr)
	}
	if !strings.Contains(out, "cycling measured") || !strings.Contains(out, "largest error of any sport") {
		t.Errorf("predict printed:\n%s", out)
	}
	code, out, stderr = runCLI(t, "pepa", "predict", path, "--json")
	if code != 0 {
		t.Fatalf("predict --json: %d %s", code, stderr)
	}
	var p struct {
		Steps []struct {
			Sports map[string]struct {
				Predicted float64 `json:"predicted"`
				Error     float64 `json:"error_percent"`
			} `json:"sports"`
		} `json:"steps"`
		MaxAbsError float64 `json:"max_abs_error_percent"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	// Saturated at 100/s, with demands 200:20:20:20 the cycling share is 10.
	if c := p.Steps[0].Sports["cycling"].Predicted; c < 9.5 || c > 10.5 || p.MaxAbsError > 5 {
		t.Errorf("prediction %+v", p)
	}
	// -o csv: a header naming each sport's columns, a row per step.
	code, out, stderr = runCLI(t, "pepa", "predict", path, "-o", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "multiplier,athletics measured,athletics predicted,athletics error %,cycling measured") ||
		!strings.HasSuffix(lines[0], ",states") || !strings.HasPrefix(lines[1], "10,99,") {
		t.Errorf("predict -o csv: %d %s\n%s", code, stderr, out)
	}
	// The written model is calibrated with the step's rates and solves.
	code, out, stderr = runCLI(t, "pepa", "solve", model, "--json")
	if code != 0 || !strings.Contains(out, "arrive_cycling_db2") {
		t.Fatalf("solve the written model: %d %s %s", code, stderr, out)
	}
	if src, _ := os.ReadFile(model); !strings.Contains(string(src), "rate_athletics = 200") {
		t.Errorf("the written model is not calibrated:\n%s", src)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("not json"), 0o644)
	if code, _, stderr := runCLI(t, "pepa", "predict", bad); code == 0 || !strings.Contains(stderr, "not the JSON of loadtest tickets") {
		t.Errorf("bad run: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "pepa", "predict", path, "--places", "-3"); code != 2 || !strings.Contains(stderr, "--places") {
		t.Errorf("negative places: exit %d %s", code, stderr)
	}
	if code, _, _ := runCLI(t, "pepa", "predict"); code != 2 {
		t.Errorf("no run: exit %d, want 2", code)
	}
}
