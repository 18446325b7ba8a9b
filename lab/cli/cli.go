// Package cli holds the lab's commands of the logbook binary: bench,
// loadtest, pepa, torture and cluster. They measure the product (the
// store, the runtimes, the services) and solve the performance models;
// cmd/logbook adds them beside its serving commands with Commands.
package cli

import (
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
)

// env is the commands' outputs, environment and logger.
type env = cliutil.Env

// Commands returns the lab's top-level commands, writing to e's outputs
// and logging to e.Log, which the root command sets before any of them
// runs.
func Commands(e *cliutil.Env) []*cobra.Command {
	return []*cobra.Command{
		newBenchCmd(e),
		newLoadtestCmd(e),
		newPepaCmd(e),
		newTortureCmd(e),
		newClusterCmd(e),
		newNemesisCmd(e),
	}
}
