package openapits

import (
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	doc := `{"components":{"schemas":{
	  "Check":{"type":"string","enum":["a","b"]},
	  "Page":{"type":"object","description":"a page","required":["items","count"],"properties":{
	    "items":{"type":"array","items":{"$ref":"#/components/schemas/Check"}},
	    "count":{"type":"integer"},
	    "next":{"type":"string","description":"the cursor"},
	    "tags":{"type":"object","additionalProperties":{"type":"boolean"}},
	    "inner":{"type":"object","required":["x"],"properties":{"x":{"type":"number"}}}}}}}}`
	got, err := Generate([]byte(doc), "doc.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`export type Check = "a" | "b";`,
		"/** a page */\nexport interface Page {",
		"  count: number;",
		"  inner?: {\n    x: number;\n  };",
		"  items: Check[];",
		"  /** the cursor */\n  next?: string;",
		"  tags?: Record<string, boolean>;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`{"components":{"schemas":{"A":{"$ref":"#/components/schemas/B"}}}}`:                                       "unknown $ref",
		`{"components":{"schemas":{"A":{"type":"object","required":["y"],"properties":{"x":{"type":"string"}}}}}}`: "required property y",
		`{"components":{"schemas":{"A":{"type":"tuple"}}}}`:                                                        `type "tuple"`,
		`{`: "openapits",
	} {
		if _, err := Generate([]byte(doc), "d"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one with %q", doc, err, want)
		}
	}
}
