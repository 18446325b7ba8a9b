package webui

import (
	"flag"
	"os"
	"testing"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/internal/openapits"
	flights "github.com/logbook/logbook/services/flights/httpapi"
	notify "github.com/logbook/logbook/services/notify/httpapi"
	tickets "github.com/logbook/logbook/services/tickets/httpapi"
)

var update = flag.Bool("update", false, "write web/src/openapi.ts, openapi-tickets.ts, openapi-notify.ts and openapi-admin.ts anew from the OpenAPI documents")

// TestUITypesAreTheAPIs: the web UI's API types are generated from the
// services' OpenAPI documents — web/src/openapi.ts from the flights one,
// web/src/openapi-tickets.ts from the tickets one, web/src/openapi-notify.ts
// from the notify one, web/src/openapi-admin.ts from the admin API's
// (engine/admin); this fails when either side changed without the
// other.
func TestUITypesAreTheAPIs(t *testing.T) {
	for _, c := range []struct {
		file, source string
		doc          []byte
	}{
		{"../../web/src/openapi.ts", "services/flights/httpapi/openapi.json", flights.OpenAPI()},
		{"../../web/src/openapi-tickets.ts", "services/tickets/httpapi/openapi.json", tickets.OpenAPI()},
		{"../../web/src/openapi-notify.ts", "services/notify/httpapi/openapi.json", notify.OpenAPI()},
		{"../../web/src/openapi-admin.ts", "engine/admin/openapi.json", admin.OpenAPI()},
	} {
		want, err := openapits.Generate(c.doc, c.source)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(c.file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not what the OpenAPI document generates: run `go test ./internal/webui -update`", c.file)
		}
	}
}
