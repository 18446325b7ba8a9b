package webui

import (
	"flag"
	"os"
	"testing"

	"github.com/logbook/logbook/internal/openapits"
	"github.com/logbook/logbook/services/flights/httpapi"
)

var update = flag.Bool("update", false, "write web/src/openapi.ts anew from the flights OpenAPI document")

// TestUITypesAreTheAPIs: the web UI's API types (web/src/openapi.ts) are
// generated from the flights OpenAPI document; this fails when either
// changed without the other.
func TestUITypesAreTheAPIs(t *testing.T) {
	const file = "../../web/src/openapi.ts"
	want, err := openapits.Generate(httpapi.OpenAPI(), "services/flights/httpapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not what the OpenAPI document generates: run `go test ./internal/webui -update`", file)
	}
}
