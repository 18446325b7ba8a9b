package cli

import (
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/lab/ticketrig"
)

// TicketsRigFlags registers the tickets experiment rig's flags (--arch,
// --node-rate, --workers, --replicas, --queue-limit, --key-limit,
// --node-inflight) on a tickets server's flags, fs. Their Gate is the
// gate the server runs requests through: straight to the store unless
// --arch asks for emulated store nodes behind one of the paper's
// schedulers (see lab/ticketrig). It is how `logbook tickets serve`
// offers the rig without the product importing the lab.
func TicketsRigFlags(fs *pflag.FlagSet) *ticketrig.Flags { return ticketrig.AddFlags(fs) }
