package main

import (
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
)

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Go       string `json:"go"`
	Revision string `json:"vcs_revision,omitempty"`
	Time     string `json:"vcs_time,omitempty"`
	Modified bool   `json:"vcs_modified"`
	Platform string `json:"platform,omitempty"`
}

// readBuildInfo reads the module version and the version control
// settings the Go toolchain records in every binary it builds.
func readBuildInfo() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildInfo{Module: "github.com/logbook/logbook", Version: "unknown"}
	}
	v := buildInfo{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" {
		v.Platform = goos + "/" + goarch
	}
	return v
}

func newVersionCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version, the commit it was built from and the Go version",
		Example: `  logbook version -o json`,
		Args:    noArgs,
	}
	o := cliutil.OutputFlag(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		v := readBuildInfo()
		rev := v.Revision
		if rev == "" {
			rev = "unknown (built without version control information)"
		} else if v.Modified {
			rev += " (with uncommitted changes)"
		}
		rows := [][2]string{
			{"logbook", v.Version},
			{"module", v.Module},
			{"commit", rev},
		}
		if v.Time != "" {
			rows = append(rows, [2]string{"commit time", v.Time})
		}
		rows = append(rows, [2]string{"go", v.Go})
		if v.Platform != "" {
			rows = append(rows, [2]string{"platform", v.Platform})
		}
		return o.Print(e.stdout, v, cliutil.Pairs(rows))
	}
	return cmd
}
