package ticketmodel

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/pepa"
)

// Point is one sport at one step: what the service served and what the
// calibrated model predicts.
type Point struct {
	Offered   float64 `json:"offered"`
	Measured  float64 `json:"measured"`
	Predicted float64 `json:"predicted"`
	// Error is (measured − predicted) / predicted, in per cent.
	Error float64 `json:"error_percent"`
}

// StepPrediction is one step of the run beside its model's prediction.
type StepPrediction struct {
	Multiplier float64 `json:"multiplier"`
	// Rates are the calibrated rates: each stream's offered rate and each
	// node's measured service rate, as the model names them.
	Rates  map[string]float64 `json:"rates"`
	Sports map[string]Point   `json:"sports"` // keyed by sport, and "control" where modelled
	States int                `json:"states"`
	// Residual of the model's steady-state solution.
	Residual float64 `json:"residual"`
}

// Prediction is a whole run beside its models.
type Prediction struct {
	Arch   string           `json:"arch"`
	Places int              `json:"places"`
	Steps  []StepPrediction `json:"steps"`
	// MaxAbsError is the largest |error| of any sport (control excluded)
	// at any step, in per cent.
	MaxAbsError float64 `json:"max_abs_error_percent"`
	Model       string  `json:"-"` // the model's text, rates uncalibrated
}

// MaxStates bounds a model's state space: beyond it Predict refuses
// rather than run out of memory (a few hundred bytes a state).
const MaxStates = 5_000_000

// Options tune Predict.
type Options struct {
	// Places overrides the model's pool (default: the run's workers for
	// the queue architectures; 20 per sport under fair, 40 under micro,
	// where a sport's queue alone decides its losses near saturation —
	// fair's model is about 230,000 states at 20 with three sports).
	Places int
	// Arch overrides the run's architecture: predict what another
	// architecture would have served under the same load and nodes.
	Arch string
}

// SpecOf is the model specification of run.
func SpecOf(run loadtest.TicketsResult, opt Options) (Spec, error) {
	arch := run.Arch
	if opt.Arch != "" {
		arch = opt.Arch
	}
	places := opt.Places
	if places <= 0 {
		places = 20
		if arch == "micro" {
			places = 40
		}
		if arch == "queue" || arch == "queue-rep" {
			places = run.Workers
			if places <= 0 {
				places = 16
			}
		}
	}
	placement := run.Placement
	if arch != run.Arch {
		placement = replace(run, arch)
	} else if len(placement) == 0 {
		return Spec{}, fmt.Errorf("the run records no placement of sports on nodes (a server or load generator older than this command)")
	}
	return Spec{Arch: arch, Sports: run.Sports, Placement: placement, Places: places, Control: arch == "queue" || arch == "queue-rep"}, nil
}

// replace places the run's sports as arch would: one node each (micro,
// queue) or the sport's own and the previous node on the ring (queue-rep,
// fair), as the service's scheduler does.
func replace(run loadtest.TicketsResult, arch string) map[string][]string {
	out := map[string][]string{}
	k := len(run.Sports)
	for j, s := range run.Sports {
		out[s] = []string{fmt.Sprintf("db%d", j+1)}
		if (arch == "queue-rep" || arch == "fair") && k > 1 {
			out[s] = append(out[s], fmt.Sprintf("db%d", (j-1+k)%k+1))
		}
	}
	return out
}

// Predict calibrates the model of run's architecture at every step with
// the rates measured in that step — each sport's and control's offered
// rate, each node's measured service rate (a node that served nothing in
// a step gets the run's configured node rate) — solves it, and sets its
// throughput per sport beside the measured one.
func Predict(ctx context.Context, run loadtest.TicketsResult, opt Options) (*Prediction, error) {
	if run.NodeRate <= 0 {
		return nil, fmt.Errorf("the run's nodes are unlimited (node rate 0): there is no service rate to model")
	}
	spec, err := SpecOf(run, opt)
	if err != nil {
		return nil, err
	}
	mdl, err := New(spec)
	if err != nil {
		return nil, err
	}
	if sharedStates(spec) > MaxStates {
		return nil, tooManyStates(spec)
	}
	parsed, err := pepa.Parse(mdl.Text)
	if err != nil {
		return nil, fmt.Errorf("ticketmodel: the generated model does not parse: %w", err)
	}
	out := &Prediction{Arch: spec.Arch, Places: spec.Places, Model: mdl.Text}
	for _, st := range run.Steps {
		rates := Rates(mdl, run, st)
		sys, err := pepa.Check(parsed, rates)
		if err != nil {
			return nil, err
		}
		chain, err := sys.Derive(MaxStates)
		var tooMany pepa.ErrTooManyStates
		if errors.As(err, &tooMany) {
			return nil, tooManyStates(spec)
		}
		if err != nil {
			return nil, err
		}
		steady, err := chain.Solve(ctx, pepa.SolveOptions{})
		if err != nil {
			return nil, fmt.Errorf("step ×%g: %w", st.Multiplier, err)
		}
		res := struct {
			States   int
			Residual float64
			pepa.Measures
		}{chain.States(), steady.Residual, steady.Measures()}
		sp := StepPrediction{Multiplier: st.Multiplier, Rates: rates, Sports: map[string]Point{}, States: res.States, Residual: res.Residual}
		for sport, acts := range mdl.Arrivals {
			pred := 0.0
			for _, a := range acts {
				pred += res.Throughput[a]
			}
			p := Point{Offered: st.Offered[sport], Measured: st.Throughput[sport], Predicted: round(pred)}
			if p.Offered > 0 && pred > 0 { // a stream offered nothing has no error to speak of
				p.Error = round(100 * (p.Measured - pred) / pred)
			}
			if sport != "control" {
				out.MaxAbsError = math.Max(out.MaxAbsError, math.Abs(p.Error))
			}
			sp.Sports[sport] = p
		}
		out.Steps = append(out.Steps, sp)
	}
	return out, nil
}

// Rates are the model's rates calibrated with one step of run.
func Rates(mdl *Model, run loadtest.TicketsResult, st loadtest.TicketsStep) map[string]float64 {
	rates := map[string]float64{}
	// A stream offered nothing still needs a positive rate; a thousandth
	// of a request per second changes nothing measurable.
	const tiny = 1e-3
	for _, s := range mdl.Spec.Sports {
		rates[mdl.Names.Rate(s)] = math.Max(st.Offered[s], tiny)
	}
	if mdl.Spec.Control {
		rates[mdl.Names.Rate("control")] = math.Max(st.Offered["control"], tiny)
	}
	for _, nd := range mdl.Nodes {
		mu := st.ServiceRate[nd]
		if mu <= 0 {
			mu = run.NodeRate
		}
		rates[mdl.Names.Service(nd)] = mu
	}
	return rates
}

func round(v float64) float64 { return math.Round(v*100) / 100 }

func tooManyStates(spec Spec) error {
	return fmt.Errorf("the model of %d sports under %s with %d places has more than %d states: predict runs with a few sports (the paper's three), or give fewer --places", len(spec.Sports), spec.Arch, spec.Places, MaxStates)
}

// sharedStates is the state count of the queue architectures' model —
// the ways to spread its places over the pool's local states (free, one
// per sport and replica, control), C(n + L − 1, L − 1) — or 0 for the
// others, whose derivation stops at MaxStates instead.
func sharedStates(spec Spec) float64 {
	if spec.Arch != "queue" && spec.Arch != "queue-rep" {
		return 0
	}
	l := 1
	for _, s := range spec.Sports {
		l += len(spec.Placement[s])
	}
	if spec.Control {
		l++
	}
	c := 1.0
	for i := 1; i < l; i++ {
		c = c * float64(spec.Places+i) / float64(i)
	}
	return c
}
