// Package layout's test keeps the import graph in the shape
// docs/ARCHITECTURE.md describes: the product (engine/, services/,
// internal/ and the logbook binary's serving commands) imports nothing of
// the lab (lab/: performance models, benchmark workloads, experiment
// rigs); the engine imports no service and no tool; a service's domain
// package imports nothing of HTTP.
package layout

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/logbook/logbook/"

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func packages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

func TestEngineImportsNoServiceOrTool(t *testing.T) {
	for _, p := range packages(t) {
		if !strings.HasPrefix(p.ImportPath, module+"engine/") {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"services/") || strings.HasPrefix(imp, module+"internal/") || strings.HasPrefix(imp, module+"cmd/") || strings.HasPrefix(imp, module+"lab/") {
				t.Errorf("%s imports %s: the engine imports no service, no tool and nothing of the lab", p.ImportPath, imp)
			}
		}
	}
}

// httpPackages are what a domain package must not import: its HTTP API
// is a package of its own (services/NAME/httpapi).
var httpPackages = []string{"net/http", module + "engine/httpkit", module + "engine/auth", module + "engine/problem"}

func TestDomainImportsNoHTTP(t *testing.T) {
	domains := 0
	for _, p := range packages(t) {
		rest, ok := strings.CutPrefix(p.ImportPath, module+"services/")
		if !ok || strings.Contains(rest, "/") {
			continue // only services/NAME is a domain package
		}
		domains++
		for _, imp := range p.Imports {
			for _, h := range httpPackages {
				if imp == h || strings.HasPrefix(imp, h+"/") {
					t.Errorf("%s imports %s: a service's domain imports nothing of HTTP", p.ImportPath, imp)
				}
			}
		}
	}
	if domains == 0 {
		t.Fatal("no service domain package found")
	}
}

// labCLI is the one lab package the binary may import: it registers the
// lab's commands (bench, loadtest, pepa, torture, cluster) beside the
// serving ones.
const labCLI = module + "lab/cli"

func TestProductImportsNoLab(t *testing.T) {
	lab := 0
	for _, p := range packages(t) {
		if strings.HasPrefix(p.ImportPath, module+"lab/") {
			lab++
			continue
		}
		all := append(append(append([]string{}, p.Imports...), p.TestImports...), p.XTestImports...)
		for _, imp := range all {
			if !strings.HasPrefix(imp, module+"lab/") {
				continue
			}
			if p.ImportPath == module+"cmd/logbook" && allowedInBinary(imp) {
				continue
			}
			t.Errorf("%s imports %s: the product imports nothing of the lab", p.ImportPath, imp)
		}
	}
	if lab == 0 {
		t.Fatal("no lab package found")
	}
}

// allowedInBinary: the binary wires the lab's commands in through labCLI
// alone.
func allowedInBinary(imp string) bool { return imp == labCLI }
