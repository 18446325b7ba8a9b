// Package openapitest checks a service's HTTP API against its OpenAPI
// document, in the service's tests: the route table and the document
// describe the same operations with the same query parameters
// (CheckDocumented), and every JSON answer a test receives is what the
// document says (Answers.Check), so that neither the document nor the
// types generated from it can drift from the server.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/logbook/logbook/engine/httpkit"
)

type param struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

// CheckDocumented fails t unless every route of specs is an operation of
// the OpenAPI document doc, every documented operation is a route, and
// each takes the query parameters the other names.
func CheckDocumented(t testing.TB, doc []byte, specs []httpkit.Spec) {
	t.Helper()
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	documented := map[string]bool{}
	queryOf := map[string][]string{}
	for path, ops := range d.Paths {
		var shared []param // path-level parameters apply to every operation
		if raw, ok := ops["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		for method, raw := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue
			}
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
					prm = d.Components.Parameters[strings.TrimPrefix(prm.Ref, "#/components/parameters/")]
				}
				if prm.In == "query" {
					queryOf[p] = append(queryOf[p], prm.Name)
				}
			}
		}
	}
	served := map[string]bool{}
	for _, s := range specs {
		p := openAPIPath(s.Pattern())
		if served[p] {
			t.Errorf("route %s is in the table twice", p)
		}
		served[p] = true
		if !documented[p] {
			t.Errorf("route %s is not in openapi.json", p)
			continue
		}
		want := slices.Sorted(slices.Values(s.Query))
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

// Answers checks JSON answers against the schemas of an OpenAPI
// document, by the route each request matches.
type Answers struct {
	once     sync.Once
	doc      []byte
	specs    []httpkit.Spec
	compiler *jsonschema.Compiler
	mux      *http.ServeMux
	err      error
	cache    sync.Map // schema location -> *jsonschema.Schema
}

// NewAnswers checks answers against doc, matching requests to specs.
func NewAnswers(doc []byte, specs []httpkit.Spec) *Answers {
	return &Answers{doc: doc, specs: specs}
}

func (a *Answers) load() {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.doc))
	if err != nil {
		a.err = err
		return
	}
	a.compiler = jsonschema.NewCompiler()
	a.err = a.compiler.AddResource("openapi.json", doc)
	a.mux = http.NewServeMux()
	for _, s := range a.specs {
		a.mux.Handle(s.Pattern(), http.NotFoundHandler())
	}
}

// openAPIPath spells a ServeMux pattern's {rest...} wildcard as OpenAPI
// does, {rest}.
func openAPIPath(pattern string) string { return strings.ReplaceAll(pattern, "...}", "}") }

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Check fails t unless a JSON answer (content type application/json, a
// 2xx status) to method path is valid against the schema the document
// gives for the route it matches and its status. Other answers pass.
func (a *Answers) Check(t testing.TB, method, path string, status int, contentType string, raw []byte) {
	t.Helper()
	if status >= 300 || !strings.HasPrefix(contentType, "application/json") {
		return
	}
	a.once.Do(a.load)
	if a.err != nil {
		t.Fatalf("openapi.json: %v", a.err)
	}
	// Only the path picks the route. httptest.NewRequest would parse
	// path as a request line and panic on a query with a blank in it,
	// which a fuzzed request can have.
	p, _, _ := strings.Cut(path, "?")
	u, err := url.Parse(p)
	if err != nil {
		u = &url.URL{Path: p}
	}
	_, pattern := a.mux.Handler(&http.Request{Method: method, URL: u, Host: "example.com"})
	_, tmpl, ok := strings.Cut(openAPIPath(pattern), " ")
	if !ok {
		t.Fatalf("%s %s answered %d but matches no route", method, path, status)
	}
	loc := fmt.Sprintf("openapi.json#/paths/%s/%s/responses/%d/content/application~1json/schema", pointerEscape(tmpl), strings.ToLower(method), status)
	var sch *jsonschema.Schema
	if v, ok := a.cache.Load(loc); ok {
		sch = v.(*jsonschema.Schema)
	} else {
		var err error
		if sch, err = a.compiler.Compile(loc); err != nil {
			t.Fatalf("%s %s answered %d with JSON, which openapi.json does not describe: %v", method, tmpl, status, err)
		}
		a.cache.Store(loc, sch)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s %s: the answer is not JSON: %v", method, path, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s %s answered %d with JSON that openapi.json does not allow: %v\n%s", method, path, status, err, raw)
	}
}
