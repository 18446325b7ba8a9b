package httpapi

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: every route of the table is documented in the
// OpenAPI document, and every documented operation is a route, with the
// same query parameters.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	type param struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	documented := map[string]bool{}
	queryOf := map[string][]string{}
	for path, ops := range doc.Paths {
		var shared []param // path-level parameters apply to every operation
		if raw, ok := ops["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		for method, raw := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				p := strings.ToUpper(method) + " " + path
				documented[p] = true
				var op struct {
					Parameters []param `json:"parameters"`
				}
				if err := json.Unmarshal(raw, &op); err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				for _, prm := range append(op.Parameters, shared...) {
					if prm.Ref != "" {
						prm = doc.Components.Parameters[strings.TrimPrefix(prm.Ref, "#/components/parameters/")]
					}
					if prm.In == "query" {
						queryOf[p] = append(queryOf[p], prm.Name)
					}
				}
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
			continue
		}
		want := slices.Sorted(slices.Values(r.Query))
		got := slices.Sorted(slices.Values(queryOf[p]))
		if !slices.Equal(got, want) {
			t.Errorf("%s: openapi.json documents query parameters %v, the route takes %v", p, got, want)
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
