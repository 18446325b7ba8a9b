// Package layout's test keeps the import graph in the shape
// docs/ARCHITECTURE.md describes: the engine imports no service and no
// tool; a service's domain package imports nothing of HTTP.
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
	ImportPath string
	Imports    []string
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
			if strings.HasPrefix(imp, module+"services/") || strings.HasPrefix(imp, module+"internal/") || strings.HasPrefix(imp, module+"cmd/") {
				t.Errorf("%s imports %s: the engine imports no service and no tool", p.ImportPath, imp)
			}
		}
	}
}

// httpPackages are what a domain package must not import: its HTTP API
// is a package of its own (services/NAME/httpapi).
var httpPackages = []string{"net/http", module + "engine/api", module + "engine/auth", module + "engine/problem"}

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
