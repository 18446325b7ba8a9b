package ticketrig

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/logbook/logbook/services/tickets"
)

// Flags are the rig's flags on a tickets server (`logbook tickets serve
// --arch …`, registered through lab/cli): without --arch the server runs
// requests straight on its store (tickets.Direct); with it, on emulated
// store nodes behind that architecture's scheduler.
type Flags struct {
	fs   *pflag.FlagSet
	arch string
	sc   SchedConfig
}

// rigFlags are the flags that configure a scheduler, so mean nothing
// without --arch.
var rigFlags = []string{"node-rate", "workers", "replicas", "replica-choice", "queue-limit", "key-limit", "node-inflight"}

// AddFlags registers the rig's flags on fs.
func AddFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.arch, "arch", "", "experiment rig: put requests on emulated store nodes behind this scheduler, micro, queue, queue-rep or fair (default: none, straight to the store)")
	fs.Float64Var(&f.sc.NodeRate, "node-rate", 100, "experiment rig: each emulated store node's capacity in requests/s (exponential service times); 0: unlimited, the real store only")
	fs.IntVar(&f.sc.Workers, "workers", 16, "experiment rig: workers of the queue architectures")
	fs.IntVar(&f.sc.Replicas, "replicas", 0, "experiment rig: nodes holding each sport, 1 or 2 (default: 2 for queue-rep and fair, else 1)")
	fs.StringVar(&f.sc.ReplicaChoice, "replica-choice", ChooseRandom, "experiment rig: how the queue architectures' workers pick one of a sport's two nodes: first (the sport's own, as a client sending each key to its first replica), random, or least-loaded")
	fs.IntVar(&f.sc.QueueLimit, "queue-limit", 4096, "experiment rig: requests waiting at most (then 503)")
	fs.IntVar(&f.sc.KeyLimit, "key-limit", 1024, "experiment rig: requests of one sport waiting at most under fair (then 429)")
	fs.IntVar(&f.sc.NodeInFlight, "node-inflight", 0, "experiment rig: requests fair lets into one node at once (default 1, or 64 with --node-rate 0)")
	return f
}

// Gate returns the gate the flags ask for, for a catalogue of sports:
// tickets.Direct without --arch, else a new Scheduler. Its errors are
// the flags' misuse.
func (f *Flags) Gate(sports []string) (tickets.Gate, error) {
	sc := f.sc
	if sc.NodeRate < 0 || sc.Workers < 1 || sc.QueueLimit < 1 || sc.KeyLimit < 1 || sc.NodeInFlight < 0 || sc.Replicas < 0 || sc.Replicas > 2 {
		return nil, fmt.Errorf("--node-rate, --node-inflight must not be negative; --workers, --queue-limit, --key-limit positive; --replicas 1 or 2")
	}
	if f.arch == "" {
		for _, name := range rigFlags {
			if f.fs.Changed(name) {
				return nil, fmt.Errorf("--%s configures the experiment rig's emulated store nodes: give --arch too", name)
			}
		}
		return tickets.Direct(), nil
	}
	sc.Arch = Arch(f.arch)
	if !slices.Contains(Archs, sc.Arch) {
		return nil, fmt.Errorf("--arch %q: want micro, queue, queue-rep or fair", f.arch)
	}
	sc.Sports = len(sports)
	return NewScheduler(sc, sports)
}
