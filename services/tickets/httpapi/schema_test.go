package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The tests' calls check every JSON answer against the schema the OpenAPI
// document gives for its route and status, so the document (and the web
// UI's types generated from it) cannot claim a field the server leaves
// out, or miss one it sends.

var (
	schemaOnce     sync.Once
	schemaCompiler *jsonschema.Compiler
	schemaErr      error
	schemaCache    sync.Map // location -> *jsonschema.Schema
	routeMux       *http.ServeMux
)

func loadSchemas() {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(OpenAPI()))
	if err != nil {
		schemaErr = err
		return
	}
	schemaCompiler = jsonschema.NewCompiler()
	schemaErr = schemaCompiler.AddResource("openapi.json", doc)
	routeMux = http.NewServeMux()
	for _, r := range Routes {
		routeMux.Handle(r.Pattern(), http.NotFoundHandler())
	}
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// checkAnswer validates a JSON answer to method path against the document.
func checkAnswer(t *testing.T, method, path string, status int, contentType string, raw []byte) {
	t.Helper()
	if status >= 300 || !strings.HasPrefix(contentType, "application/json") {
		return
	}
	schemaOnce.Do(loadSchemas)
	if schemaErr != nil {
		t.Fatalf("openapi.json: %v", schemaErr)
	}
	req := httptest.NewRequest(method, path, nil)
	_, pattern := routeMux.Handler(req)
	_, tmpl, ok := strings.Cut(pattern, " ")
	if !ok {
		t.Fatalf("%s %s answered %d but matches no route", method, path, status)
	}
	loc := fmt.Sprintf("openapi.json#/paths/%s/%s/responses/%d/content/application~1json/schema", pointerEscape(tmpl), strings.ToLower(method), status)
	var sch *jsonschema.Schema
	if v, ok := schemaCache.Load(loc); ok {
		sch = v.(*jsonschema.Schema)
	} else {
		var err error
		sch, err = schemaCompiler.Compile(loc)
		if err != nil {
			t.Fatalf("%s %s answered %d with JSON, which openapi.json does not describe: %v", method, tmpl, status, err)
		}
		schemaCache.Store(loc, sch)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
	}
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s %s answered %d with JSON that openapi.json does not allow: %v\n%s", method, path, status, err, raw)
	}
}
