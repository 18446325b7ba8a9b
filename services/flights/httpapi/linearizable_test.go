package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/logbook/logbook/engine/httpkit"
)

// Operations on a rotation through the HTTP API, and their answers.
type rotIn struct {
	rotation string
	read     bool   // GET the rotation; else add a leg
	ifMatch  uint64 // 0: no If-Match
	number   int    // the leg's flight number, unique in the history
}

type rotOut struct {
	conflict bool
	version  uint64 // after the add; the conflict's actual; the read's
	legs     string // a read: the legs' flight numbers, sorted: "3,17,"
}

type rotState struct {
	version uint64
	legs    string
}

func sortedNumbers(legs string, add int) string {
	var ns []int
	for f := range strings.SplitSeq(legs, ",") {
		if n, err := strconv.Atoi(f); err == nil {
			ns = append(ns, n)
		}
	}
	ns = append(ns, add)
	slices.Sort(ns)
	var b strings.Builder
	for _, n := range ns {
		b.WriteString(strconv.Itoa(n) + ",")
	}
	return b.String()
}

// rotationModel is a rotation as its HTTP API promises: adding a leg
// moves it one version on, unless If-Match names another version (409
// with the actual one); a read returns the version and the legs.
var rotationModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range history {
			r := op.Input.(rotIn).rotation
			by[r] = append(by[r], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return rotState{version: 1} }, // created
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(rotState), input.(rotIn), output.(rotOut)
		if in.read {
			return out.version == st.version && out.legs == st.legs, st
		}
		ok := in.ifMatch == 0 || in.ifMatch == st.version
		if out.conflict {
			return !ok && out.version == st.version, st
		}
		if !ok || out.version != st.version+1 {
			return false, st
		}
		return true, rotState{st.version + 1, sortedNumbers(st.legs, in.number)}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(rotIn), output.(rotOut)
		switch {
		case in.read:
			return fmt.Sprintf("GET %s = v%d [%s]", in.rotation, out.version, out.legs)
		case out.conflict:
			return fmt.Sprintf("add %d to %s if-match %d: 409, actual %d", in.number, in.rotation, in.ifMatch, out.version)
		}
		return fmt.Sprintf("add %d to %s if-match %d = v%d", in.number, in.rotation, in.ifMatch, out.version)
	},
}

// TestLinearizableOverHTTP records histories of 16 clients adding legs to
// three rotations (with If-Match the version they last saw, or without)
// and reading them, all through the HTTP API of a real service, and
// checks them with porcupine.
func TestLinearizableOverHTTP(t *testing.T) {
	srv, _ := newAPI(t)
	rotations := []string{"R0", "R1", "R2"}
	for _, r := range rotations {
		expect(t, call(t, srv, plannerToken, "POST", "/api/rotations", `{"id":"`+r+`"}`), 201)
	}
	do := func(method, path, body string, ifMatch uint64) (int, map[string]any, error) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+plannerToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if ifMatch > 0 {
			req.Header.Set("If-Match", strconv.Quote(strconv.FormatUint(ifMatch, 10)))
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return res.StatusCode, nil, fmt.Errorf("%s %s: %d, not JSON: %s", method, path, res.StatusCode, raw)
		}
		return res.StatusCode, m, nil
	}
	const clients, opsPerClient = 16, 25
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu     sync.Mutex
		ops    []porcupine.Operation
		failed error
		wg     sync.WaitGroup
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(3, uint64(c)))
			seen := map[string]uint64{}
			for i := range opsPerClient {
				in := rotIn{rotation: rotations[rng.IntN(len(rotations))], number: c*opsPerClient + i + 1}
				var out rotOut
				call := now()
				var err error
				if in.read = rng.IntN(3) == 0; in.read {
					var status int
					var m map[string]any
					status, m, err = do("GET", "/api/rotations/"+in.rotation, "", 0)
					if err == nil && status != 200 {
						err = fmt.Errorf("GET: %d %v", status, m)
					}
					if err == nil {
						out.version = uint64(m["version"].(float64))
						legs, _ := m["legs"].([]any)
						for _, l := range legs {
							out.legs = sortedNumbers(out.legs, int(l.(map[string]any)["number"].(float64)))
						}
					}
				} else {
					if rng.IntN(4) > 0 {
						in.ifMatch = max(seen[in.rotation], 1)
					}
					dep := base.Add(time.Duration(in.number) * 3 * time.Hour)
					body := fmt.Sprintf(`{"airline":"LH","number":%d,"origin":"FRA","destination":"MUC","departure":%q,"arrival":%q}`,
						in.number, dep.Format(time.RFC3339), dep.Add(time.Hour).Format(time.RFC3339))
					var status int
					var m map[string]any
					status, m, err = do("POST", "/api/rotations/"+in.rotation+"/legs", body, in.ifMatch)
					switch {
					case err != nil:
					case status == 201:
						out.version = uint64(m["version"].(float64))
					case status == 409 && m["type"] == httpkit.TypeVersionConflict:
						out.conflict, out.version = true, uint64(m["actual_version"].(float64))
					default:
						err = fmt.Errorf("add leg: %d %v", status, m)
					}
				}
				ret := now()
				if err != nil {
					mu.Lock()
					failed = errors.Join(failed, fmt.Errorf("client %d: %w", c, err))
					mu.Unlock()
					return
				}
				seen[in.rotation] = out.version
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	res, info := porcupine.CheckOperationsVerbose(rotationModel, ops, time.Minute)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("logbook-http-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(rotationModel, info, path); err != nil {
			path = err.Error()
		}
		t.Fatalf("history of %d operations: %v (visualization: %s)", len(ops), res, path)
	}
	adds, conflicts := 0, 0
	for _, op := range ops {
		if !op.Input.(rotIn).read {
			adds++
			if op.Output.(rotOut).conflict {
				conflicts++
			}
		}
	}
	if conflicts == 0 || conflicts == adds {
		t.Fatalf("%d adds, %d conflicts: the workload tests too little", adds, conflicts)
	}
	t.Logf("%d operations through HTTP (%d adds, %d of them 409): linearizable", len(ops), adds, conflicts)
}
