package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/stats"
)

// RegistryConfig describes the schema registry workload of `logbook bench
// registry`.
type RegistryConfig struct {
	Lookups  int // schema lookups by id over HTTP
	Writers  int // concurrent closed-loop lookup clients
	Versions int // earlier versions each timed registration is checked against
	Fields   int // fields of the record schema
	Timed    int // registrations timed after the first Versions
}

// RegistryResult is what `logbook bench registry` reports.
type RegistryResult struct {
	Lookups       int     `json:"lookups"`
	Writers       int     `json:"writers"`
	LookupsPerSec float64 `json:"lookups_per_sec"`
	LookupP50MS   float64 `json:"lookup_p50_ms"`
	LookupP99MS   float64 `json:"lookup_p99_ms"`
	// LookupCPUUS is the CPU time of this process (server and clients
	// together) per lookup: on a shared machine, where the wall-clock
	// rate says more about the neighbours, it says what a lookup costs.
	LookupCPUUS   float64 `json:"lookup_cpu_us"`
	Versions      int     `json:"versions"`
	Fields        int     `json:"fields"`
	Level         string  `json:"level"`
	RegisterMS    float64 `json:"register_ms"`     // mean of the timed registrations
	RegisterMaxMS float64 `json:"register_max_ms"` // the slowest of them
	PeakRSSMB     float64 `json:"peak_rss_mb"`
}

// Rows renders the result as a two-column table.
func (r RegistryResult) Rows() [][2]string {
	return [][2]string{
		{"lookups by id / clients", fmt.Sprintf("%d / %d", r.Lookups, r.Writers)},
		{"lookups/s", fmt.Sprintf("%.0f", r.LookupsPerSec)},
		{"lookup p50 / p99 ms", fmt.Sprintf("%.3f / %.3f", r.LookupP50MS, r.LookupP99MS)},
		{"CPU µs per lookup (server + clients)", fmt.Sprintf("%.1f", r.LookupCPUUS)},
		{"register: level, earlier versions, fields", fmt.Sprintf("%s, %d, %d", r.Level, r.Versions, r.Fields)},
		{"register mean / max ms", fmt.Sprintf("%.2f / %.2f", r.RegisterMS, r.RegisterMaxMS)},
		{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)},
	}
}

// benchSchema is version v of a record of fields fields, every one with a
// default, the last named after v: each version can read every other's
// data both ways, so FULL_TRANSITIVE accepts it after all earlier ones,
// and each check walks every field.
func benchSchema(v, fields int) string {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"Wide","namespace":"bench","fields":[`)
	for i := range fields - 1 {
		typ := [...]string{`"long"`, `"string"`, `"double"`, `["null","string"]`}[i%4]
		def := [...]string{`0`, `""`, `0.0`, `null`}[i%4]
		fmt.Fprintf(&b, `{"name":"f%d","type":%s,"default":%s},`, i, typ, def)
	}
	fmt.Fprintf(&b, `{"name":"v%d","type":"long","default":%d}]}`, v, v)
	return b.String()
}

// RunRegistry serves a registry on store over HTTP on a loopback port and
// measures, as clients see it: registering new versions of a wide record
// under FULL_TRANSITIVE against cfg.Versions earlier ones, then cfg.Lookups
// lookups of schemas by id (GET /schemas/ids/{id}) from cfg.Writers
// closed-loop clients.
func RunRegistry(ctx context.Context, store eventstore.Store, cfg RegistryConfig) (RegistryResult, error) {
	if cfg.Lookups <= 0 || cfg.Writers <= 0 || cfg.Versions <= 0 || cfg.Fields <= 1 || cfg.Timed <= 0 {
		return RegistryResult{}, errors.New("bench registry: lookups, writers, versions and timed must be positive, fields above 1")
	}
	reg, err := registry.Open(ctx, store, registry.Options{})
	if err != nil {
		return RegistryResult{}, err
	}
	defer reg.Close()
	const adminToken, viewerToken = "bench-admin-token", "bench-viewer-token"
	tokens, err := auth.ParseEnv(adminToken+":"+string(registry.SchemaAdmin)+","+viewerToken+":viewer", registry.Roles())
	if err != nil {
		return RegistryResult{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return RegistryResult{}, err
	}
	mux := http.NewServeMux()
	mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, tokens)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String() + "/registry"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Writers, MaxConnsPerHost: cfg.Writers}}

	call := func(method, path, token string, body any) ([]byte, error) {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				return nil, err
			}
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", registry.ContentType)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out, nil
	}

	// A subject of its own per run, so that a data directory can be reused.
	subject := "bench-" + newRunID()
	if _, err := call("PUT", "/config/"+subject, adminToken, map[string]string{"compatibility": "FULL_TRANSITIVE"}); err != nil {
		return RegistryResult{}, err
	}
	var ids []int
	var timed []time.Duration
	for v := 1; v <= cfg.Versions+cfg.Timed; v++ {
		t0 := time.Now()
		out, err := call("POST", "/subjects/"+subject+"/versions", adminToken, map[string]string{"schema": benchSchema(v, cfg.Fields)})
		if err != nil {
			return RegistryResult{}, err
		}
		if v > cfg.Versions {
			timed = append(timed, time.Since(t0))
		}
		var r struct{ ID int }
		if err := json.Unmarshal(out, &r); err != nil {
			return RegistryResult{}, err
		}
		ids = append(ids, r.ID)
	}
	var sum time.Duration
	for _, d := range timed {
		sum += d
	}
	regMax := stats.Summarize(timed).Max

	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	// Lookups go through the load tests' client (fasthttp, pipelined over
	// a few connections): net/http's client would spend as much CPU per
	// request as the server, on the same two cores.
	lookups := loadtest.NewClient("http://"+ln.Addr().String(), viewerToken, 4, 200*time.Microsecond)
	defer lookups.Close()
	lat := make([][]time.Duration, cfg.Writers)
	cpu0 := processCPU()
	start := time.Now()
	for w := range cfg.Writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			lat[w] = make([]time.Duration, 0, cfg.Lookups/cfg.Writers+1)
			for next.Add(1) <= int64(cfg.Lookups) {
				t0 := time.Now()
				_, _, err := lookups.Do(ctx, "GET", "/registry/schemas/ids/"+strconv.Itoa(ids[rng.IntN(len(ids))]), "")
				lat[w] = append(lat[w], time.Since(t0))
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if first != nil {
		return RegistryResult{}, fmt.Errorf("bench registry: lookup: %w", first)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	lookupSum := stats.Summarize(all)
	return RegistryResult{
		Lookups: cfg.Lookups, Writers: cfg.Writers,
		LookupsPerSec: stats.Round(float64(cfg.Lookups)/elapsed.Seconds(), 0),
		LookupP50MS:   lookupSum.P50, LookupP99MS: lookupSum.P99,
		LookupCPUUS: stats.Round(float64(cpu.Microseconds())/float64(cfg.Lookups), 1),
		Versions:    cfg.Versions, Fields: cfg.Fields, Level: string(registry.FullTransitive),
		RegisterMS:    stats.Round(stats.MS(sum)/float64(len(timed)), 2),
		RegisterMaxMS: regMax,
		PeakRSSMB:     stats.Round(PeakRSSMB(), 1),
	}, nil
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
