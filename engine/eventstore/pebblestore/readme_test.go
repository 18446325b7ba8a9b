package pebblestore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestReadmeExample checks that the Go code README.md shows under "Using
// the engine as a library" is the body of Example in example_test.go, so
// that the README's snippet is code that compiles and runs.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Using the engine as a library\n")
	if !ok {
		t.Fatal(`README.md has no section "## Using the engine as a library"`)
	}
	_, code, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatal("README.md's library section has no ```go block")
	}
	code, _, ok = strings.Cut(code, "\n```\n")
	if !ok {
		t.Fatal("README.md's library code block does not end")
	}

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for _, d := range file.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Example" && fn.Recv == nil {
			inner := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
			var lines []string
			for _, line := range strings.Split(strings.Trim(string(inner), "\n"), "\n") {
				lines = append(lines, strings.TrimPrefix(line, "\t"))
			}
			body = strings.Join(lines, "\n")
		}
	}
	if body == "" {
		t.Fatal("example_test.go has no func Example")
	}
	if code != body {
		t.Errorf("README.md's library snippet differs from the body of Example in engine/eventstore/pebblestore/example_test.go; copy it over.\nREADME:\n%s\n\nExample:\n%s", code, body)
	}
}
