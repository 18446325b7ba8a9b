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
