package bench

import (
	"errors"
	"math"
)

// Station is one service centre of a queueing network: a process with a
// CPU quota, serving each visit for Demand seconds of CPU time (the
// service demand law: CPU-seconds used ÷ completions). With a quota of
// CPUs it serves as one server that many times as fast, so a request's
// time there is Demand ÷ CPUs.
type Station struct {
	Name   string
	Demand float64 // CPU-seconds per request, all visits
	CPUs   float64 // quota; the station's speed
}

// time is the station's service time per request.
func (s Station) time() float64 {
	if s.CPUs <= 0 {
		return s.Demand
	}
	return s.Demand / s.CPUs
}

// MVAResult is the solution of a closed network for N customers.
type MVAResult struct {
	Throughput float64   // requests per second
	Response   float64   // seconds per request, all stations
	Queue      []float64 // mean requests at each station
	Util       []float64 // each station's utilisation
}

// MVA solves a closed queueing network of single-server stations and a
// think time (seconds a customer spends between requests) for n
// customers by exact mean-value analysis (Reiser and Lavenberg): the
// residence time at a station is its service time × (1 + the queue a
// customer arriving there finds, which is the queue with one customer
// fewer); Little's law closes the recursion.
func MVA(stations []Station, think float64, n int) (MVAResult, error) {
	if n < 1 || len(stations) == 0 || think < 0 {
		return MVAResult{}, errors.New("mva: want at least one customer and one station, and no negative think time")
	}
	q := make([]float64, len(stations))
	r := make([]float64, len(stations))
	var x, total float64
	for k := 1; k <= n; k++ {
		total = 0
		for i, s := range stations {
			r[i] = s.time() * (1 + q[i])
			total += r[i]
		}
		x = float64(k) / (think + total)
		for i := range stations {
			q[i] = x * r[i]
		}
	}
	u := make([]float64, len(stations))
	for i, s := range stations {
		u[i] = x * s.time()
	}
	return MVAResult{Throughput: x, Response: total, Queue: q, Util: u}, nil
}

// OpenPrediction is what an open network (requests arriving at a fixed
// rate) does at one offered rate.
type OpenPrediction struct {
	Throughput float64 // min(offered, the bottleneck's capacity)
	Bottleneck string  // the station that saturates first
	MaxUtil    float64 // its utilisation at the offered rate (can exceed 1)
	// P99 is the 99th percentile of the response time, in seconds,
	// taking each station as M/M/1 (exponential response time:
	// p99 = mean × ln 100); +Inf past saturation.
	P99 float64
}

// Open applies the utilisation law to an open network: station i is busy
// U_i = λ × service time of a request there; the network serves λ while
// every U_i < 1, and the bottleneck's capacity (1 ÷ its service time)
// beyond.
func Open(stations []Station, lambda float64) OpenPrediction {
	p := OpenPrediction{Throughput: lambda}
	var resp float64
	for _, s := range stations {
		u := lambda * s.time()
		if u > p.MaxUtil {
			p.MaxUtil, p.Bottleneck = u, s.Name
		}
		if u >= 1 {
			resp = math.Inf(1)
		} else {
			resp += s.time() / (1 - u)
		}
	}
	if p.MaxUtil > 1 {
		p.Throughput = lambda / p.MaxUtil
	}
	p.P99 = resp * math.Log(100)
	return p
}

// LDStation is a load-dependent service centre: with j requests present
// it completes Rate(j) of them a second (Rate(j) > 0 for j ≥ 1).
type LDStation struct {
	Name string
	Rate func(j int) float64
}

// MVALD is MVA with one load-dependent station besides the fixed-rate
// ones: its residence time is Σ j ÷ Rate(j) × P(j−1 there with one
// customer fewer), and the marginal probabilities P(j) follow from the
// throughput (exact MVA for load-dependent stations, Reiser and
// Lavenberg). The load-dependent station is the last in Queue and Util.
func MVALD(stations []Station, ld LDStation, think float64, n int) (MVAResult, error) {
	if n < 1 || think < 0 || ld.Rate == nil {
		return MVAResult{}, errors.New("mva: want at least one customer, a load-dependent rate, and no negative think time")
	}
	q := make([]float64, len(stations))
	r := make([]float64, len(stations))
	p := []float64{1} // P(j at the load-dependent station), one customer fewer
	var x, total, rld float64
	for k := 1; k <= n; k++ {
		total = 0
		for i, s := range stations {
			r[i] = s.time() * (1 + q[i])
			total += r[i]
		}
		rld = 0
		for j := 1; j <= k; j++ {
			rld += float64(j) / ld.Rate(j) * p[j-1]
		}
		total += rld
		x = float64(k) / (think + total)
		for i := range stations {
			q[i] = x * r[i]
		}
		next := make([]float64, k+1)
		var busy float64
		for j := 1; j <= k; j++ {
			next[j] = x / ld.Rate(j) * p[j-1]
			busy += next[j]
		}
		next[0] = math.Max(0, 1-busy)
		p = next
	}
	u := make([]float64, len(stations), len(stations)+1)
	for i, s := range stations {
		u[i] = x * s.time()
	}
	return MVAResult{Throughput: x, Response: total, Queue: append(q, x*rld), Util: append(u, 1-p[0])}, nil
}

// BatchingStore is PostgreSQL under logbook's appenders: the commands at
// the store, j of them spread evenly over n writing processes, travel in
// batches, one transaction each, and each process has at most perProcess
// batches in flight. A transaction costs txCPU CPU-seconds whatever it
// carries (what an append adds is small beside a commit's fixed cost), so
// with B batches in flight the store, at cpus, completes cpus ÷ txCPU
// transactions a second, each carrying j ÷ B commands. More processes
// sharing the same commands make more, smaller batches: the store's
// demand per command grows with n unless the commands at it grow too.
func BatchingStore(n, perProcess int, txCPU, cpus float64) LDStation {
	return LDStation{Name: "store", Rate: func(j int) float64 {
		return cpus / txCPU * float64(j) / expectedBatches(j, n, perProcess)
	}}
}

// expectedBatches is the mean number of batches in flight when j commands
// are spread at random over n processes with at most per batches each:
// n × E[min(C, per)], C binomial (j, 1/n).
func expectedBatches(j, n, per int) float64 {
	if n <= 1 {
		return float64(min(j, per))
	}
	pr := 1 / float64(n)
	var e float64
	// P(C = c) for c = 0 … per−1; the rest of the mass counts per.
	pc := math.Pow(1-pr, float64(j)) // c = 0
	rest := 1.0
	for c := 0; c < per && c <= j; c++ {
		e += float64(c) * pc
		rest -= pc
		pc *= float64(j-c) / float64(c+1) * pr / (1 - pr)
	}
	e += float64(per) * math.Max(0, rest)
	return float64(n) * e
}
