package httpapi

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: every route of the table is documented in the
// OpenAPI document, and every documented operation is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range Routes {
		p := r.Pattern()
		if served[p] {
			t.Errorf("route %s is in the table twice", p)
		}
		served[p] = true
		if !documented[p] {
			t.Errorf("route %s is not in openapi.json", p)
		}
	}
	var extra []string
	for p := range documented {
		if !served[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(extra)
	for _, p := range extra {
		t.Errorf("openapi.json documents %s, which no route serves", p)
	}
}
