package ticketrig

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/logbook/logbook/services/tickets"
)

// Without --arch the flags give the direct gate; with it, that
// architecture's scheduler as configured; misuse is an error that names
// the flag.
func TestFlags(t *testing.T) {
	gate := func(args ...string) (tickets.Gate, error) {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f := AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Gate(tickets.DefaultSports)
	}
	g, err := gate()
	if err != nil || g.Describe().Name != tickets.DirectName || len(g.Describe().Nodes) != 0 {
		t.Fatalf("no flags: %v %+v, want the direct gate", err, g)
	}
	g, err = gate("--arch", "queue", "--node-rate", "40", "--workers", "5")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	info := g.Describe()
	if info.Name != "queue" || info.Workers != 5 || len(info.Nodes) != 3 || info.Nodes[0].Rate != 40 || info.Nodes[2].Name != "db3" {
		t.Fatalf("--arch queue: %+v", info)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--arch", "lifo"}, `--arch "lifo"`},
		{[]string{"--arch", "fair", "--node-rate", "-1"}, "must not be negative"},
		{[]string{"--arch", "fair", "--replicas", "3"}, "--replicas 1 or 2"},
		{[]string{"--arch", "micro", "--replicas", "2"}, "2 replicas"},
		{[]string{"--node-rate", "50"}, "--node-rate configures the experiment rig"},
		{[]string{"--key-limit", "5"}, "give --arch too"},
	} {
		if g, err := gate(c.args...); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, %v; want an error saying %q", c.args, g, err, c.msg)
		}
	}
}
