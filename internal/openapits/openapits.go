// Package openapits writes TypeScript types from the schemas of an
// OpenAPI 3.1 document (components.schemas), so that the web UI's types
// are the API's, never copied by hand. It covers what logbook's documents
// use: objects with properties and required lists, arrays, $ref, string
// enums, maps (additionalProperties), and the scalar types.
package openapits

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Schema is the part of a JSON Schema the generator reads.
type Schema struct {
	Ref                  string             `json:"$ref"`
	Type                 string             `json:"type"`
	Enum                 []string           `json:"enum"`
	Items                *Schema            `json:"items"`
	Properties           map[string]*Schema `json:"properties"`
	Required             []string           `json:"required"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Description          string             `json:"description"`
	AllOf                []*Schema          `json:"allOf"`
}

// Generate returns the TypeScript declarations of doc's component
// schemas, one exported type per schema, in name order; source names
// the document in the header.
func Generate(doc []byte, source string) (string, error) {
	var d struct {
		Components struct {
			Schemas map[string]*Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return "", fmt.Errorf("openapits: %w", err)
	}
	names := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "// Generated from %s by internal/openapits: do not edit.\n// `go test ./internal/webui -update` writes it anew.\n", source)
	for _, n := range names {
		s := d.Components.Schemas[n]
		t, err := tsType(s, "", d.Components.Schemas)
		if err != nil {
			return "", fmt.Errorf("openapits: schema %s: %w", n, err)
		}
		b.WriteString("\n")
		comment(&b, "", s.Description)
		if s.Type == "object" && len(s.Properties) > 0 {
			fmt.Fprintf(&b, "export interface %s %s\n", n, t)
		} else {
			fmt.Fprintf(&b, "export type %s = %s;\n", n, t)
		}
	}
	return b.String(), nil
}

func comment(b *strings.Builder, indent, text string) {
	if text != "" {
		fmt.Fprintf(b, "%s/** %s */\n", indent, strings.ReplaceAll(text, "*/", "*\\/"))
	}
}

func tsType(s *Schema, indent string, all map[string]*Schema) (string, error) {
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		if !ok || all[name] == nil {
			return "", fmt.Errorf("unknown $ref %q", s.Ref)
		}
		return name, nil
	}
	if len(s.AllOf) > 0 {
		parts := make([]string, len(s.AllOf))
		for i, p := range s.AllOf {
			t, err := tsType(p, indent, all)
			if err != nil {
				return "", err
			}
			parts[i] = t
		}
		return strings.Join(parts, " & "), nil
	}
	switch s.Type {
	case "string":
		if len(s.Enum) > 0 {
			lits := make([]string, len(s.Enum))
			for i, e := range s.Enum {
				lits[i] = strconv.Quote(e)
			}
			return strings.Join(lits, " | "), nil
		}
		return "string", nil
	case "integer", "number":
		return "number", nil
	case "boolean":
		return "boolean", nil
	case "array":
		if s.Items == nil {
			return "unknown[]", nil
		}
		t, err := tsType(s.Items, indent, all)
		if err != nil {
			return "", err
		}
		if !strings.HasPrefix(t, "{") && strings.ContainsAny(t, " |&") {
			t = "(" + t + ")"
		}
		return t + "[]", nil
	case "object", "":
		if len(s.Properties) == 0 {
			if len(s.AdditionalProperties) > 0 && string(s.AdditionalProperties) != "false" && string(s.AdditionalProperties) != "true" {
				var v Schema
				if err := json.Unmarshal(s.AdditionalProperties, &v); err != nil {
					return "", err
				}
				t, err := tsType(&v, indent, all)
				if err != nil {
					return "", err
				}
				return "Record<string, " + t + ">", nil
			}
			return "Record<string, unknown>", nil
		}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
		var b strings.Builder
		b.WriteString("{\n")
		inner := indent + "  "
		for _, n := range names {
			p := s.Properties[n]
			t, err := tsType(p, inner, all)
			if err != nil {
				return "", fmt.Errorf("property %s: %w", n, err)
			}
			comment(&b, inner, p.Description)
			opt := "?"
			if slices.Contains(s.Required, n) {
				opt = ""
			}
			fmt.Fprintf(&b, "%s%s%s: %s;\n", inner, n, opt, t)
		}
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				return "", fmt.Errorf("required property %s is not defined", r)
			}
		}
		b.WriteString(indent + "}")
		return b.String(), nil
	}
	return "", fmt.Errorf("type %q is not supported", s.Type)
}
