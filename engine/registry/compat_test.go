package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// rec builds a record schema named R from field definitions.
func rec(fields ...string) string {
	return `{"type":"record","name":"R","namespace":"test","fields":[` + strings.Join(fields, ",") + `]}`
}

func enum(symbols string, dflt string) string {
	s := `{"type":"enum","name":"E","symbols":[` + symbols + `]`
	if dflt != "" {
		s += `,"default":"` + dflt + `"`
	}
	s += "}"
	return rec(`{"name":"e","type":` + s + `}`)
}

// resolutionCases are the cases of the Avro specification's "Schema
// Resolution" section: an old schema, a new one, and whether the new one
// reads data written with the old (backward) and the old reads data
// written with the new (forward). Each expectation is the spec's rule, not
// what hamba/avro happens to answer.
var resolutionCases = []struct {
	name              string
	old, new          string
	backward, forward bool
}{
	{"add field with default", rec(`{"name":"a","type":"int"}`), rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"string","default":"x"}`), true, true},
	{"add field without default", rec(`{"name":"a","type":"int"}`), rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"string"}`), false, true},
	{"remove field without default", rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"string"}`), rec(`{"name":"a","type":"int"}`), true, false},
	{"remove field with default", rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"string","default":""}`), rec(`{"name":"a","type":"int"}`), true, true},
	{"rename field by alias", rec(`{"name":"a","type":"int"}`), rec(`{"name":"a2","type":"int","aliases":["a"]}`), true, false},
	{"rename field without alias", rec(`{"name":"a","type":"int"}`), rec(`{"name":"a2","type":"int"}`), false, false},
	{"rename record by alias", `{"type":"record","name":"Old","namespace":"test","fields":[{"name":"a","type":"int"}]}`, `{"type":"record","name":"New","namespace":"test","aliases":["Old"],"fields":[{"name":"a","type":"int"}]}`, true, false},
	{"rename record without alias", `{"type":"record","name":"Old","fields":[{"name":"a","type":"int"}]}`, `{"type":"record","name":"New","fields":[{"name":"a","type":"int"}]}`, false, false},
	{"widen union", rec(`{"name":"u","type":["null","string"]}`), rec(`{"name":"u","type":["null","string","int"]}`), true, false},
	{"narrow union", rec(`{"name":"u","type":["null","string","int"]}`), rec(`{"name":"u","type":["null","string"]}`), false, true},
	{"type to union with it", rec(`{"name":"u","type":"string"}`), rec(`{"name":"u","type":["null","string"]}`), true, false},
	{"promote int to long", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"long"}`), true, false},
	{"promote long to float", rec(`{"name":"n","type":"long"}`), rec(`{"name":"n","type":"float"}`), true, false},
	{"promote float to double", rec(`{"name":"n","type":"float"}`), rec(`{"name":"n","type":"double"}`), true, false},
	{"promote int to double", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"double"}`), true, false},
	{"demote double to int", rec(`{"name":"n","type":"double"}`), rec(`{"name":"n","type":"int"}`), false, true},
	{"promote inside array", rec(`{"name":"n","type":{"type":"array","items":"int"}}`), rec(`{"name":"n","type":{"type":"array","items":"long"}}`), true, false},
	{"promote map values", rec(`{"name":"n","type":{"type":"map","values":"float"}}`), rec(`{"name":"n","type":{"type":"map","values":"double"}}`), true, false},
	{"string to bytes", rec(`{"name":"s","type":"string"}`), rec(`{"name":"s","type":"bytes"}`), true, true},
	{"bytes to string", rec(`{"name":"s","type":"bytes"}`), rec(`{"name":"s","type":"string"}`), true, true},
	{"string to int", rec(`{"name":"s","type":"string"}`), rec(`{"name":"s","type":"int"}`), false, false},
	{"enum symbol added, no default", enum(`"A","B"`, ""), enum(`"A","B","C"`, ""), true, false},
	{"enum symbol added, reader default", enum(`"A","B"`, "A"), enum(`"A","B","C"`, "A"), true, true},
	{"enum symbol removed, no default", enum(`"A","B","C"`, ""), enum(`"A","B"`, ""), false, true},
	{"enum symbol removed, reader default", enum(`"A","B","C"`, "A"), enum(`"A","B"`, "A"), true, true},
	{"fixed size changed", rec(`{"name":"f","type":{"type":"fixed","name":"F","size":16}}`), rec(`{"name":"f","type":{"type":"fixed","name":"F","size":32}}`), false, false},
	{"fixed same size", rec(`{"name":"f","type":{"type":"fixed","name":"F","size":16}}`), rec(`{"name":"f","type":{"type":"fixed","name":"F","size":16},"doc":"checksum"}`), true, true},
	{"nested record: field with default", rec(`{"name":"in","type":{"type":"record","name":"I","fields":[{"name":"x","type":"int"}]}}`), rec(`{"name":"in","type":{"type":"record","name":"I","fields":[{"name":"x","type":"int"},{"name":"y","type":"int","default":0}]}}`), true, true},
	{"nested record: field without default", rec(`{"name":"in","type":{"type":"record","name":"I","fields":[{"name":"x","type":"int"}]}}`), rec(`{"name":"in","type":{"type":"record","name":"I","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}}`), false, true},
	{"named type reference", rec(`{"name":"a","type":{"type":"record","name":"I","fields":[{"name":"x","type":"int"}]}}`, `{"name":"b","type":"I"}`), rec(`{"name":"a","type":{"type":"record","name":"I","fields":[{"name":"x","type":"long"}]}}`, `{"name":"b","type":"I"}`), true, false},
	{"recursive: field with default", `{"type":"record","name":"List","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","List"]}]}`, `{"type":"record","name":"List","fields":[{"name":"v","type":"int"},{"name":"w","type":"int","default":0},{"name":"next","type":["null","List"]}]}`, true, true},
	{"recursive: field without default", `{"type":"record","name":"List","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","List"]}]}`, `{"type":"record","name":"List","fields":[{"name":"v","type":"int"},{"name":"w","type":"int"},{"name":"next","type":["null","List"]}]}`, false, true},
	{"recursive: promotion", `{"type":"record","name":"List","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","List"]}]}`, `{"type":"record","name":"List","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","List"]}]}`, true, false},
}

var allLevels = []Level{Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive, None}

// TestResolutionCasesEveryLevel registers each case's old and new schema
// under every level and expects the new one accepted exactly when the
// level's directions hold; then checks the compatibility endpoint agrees.
func TestResolutionCasesEveryLevel(t *testing.T) {
	f := newFixture(t)
	for _, c := range resolutionCases {
		for _, level := range allLevels {
			want := (!level.backward() || c.backward) && (!level.forward() || c.forward)
			subj := fmt.Sprintf("%s-%s", strings.ReplaceAll(c.name, " ", "_"), level)
			f.want("PUT", "/config/"+subj, map[string]string{"compatibility": string(level)}, 200, `{"compatibility":"`+string(level)+`"}`)
			f.want("POST", "/subjects/"+subj+"/versions", schemaBody(c.old), 200, "")
			status, body := f.call("POST", "/compatibility/subjects/"+subj+"/versions/latest?verbose=true", schemaBody(c.new))
			if status != 200 || strings.Contains(body, `"is_compatible":true`) != want {
				t.Errorf("%s under %s: check answered %d %s, want compatible=%v", c.name, level, status, body, want)
			}
			if want {
				f.want("POST", "/subjects/"+subj+"/versions", schemaBody(c.new), 200, "")
			} else {
				f.wantCode("POST", "/subjects/"+subj+"/versions", schemaBody(c.new), 409, 409)
				if !strings.Contains(body, `"messages":[`) {
					t.Errorf("%s under %s: verbose check gave no reasons: %s", c.name, level, body)
				}
			}
		}
	}
}

// TestTransitiveLevelsCheckEveryVersion: v1 {a}, v2 {a, b default}, v3
// {a, b} without b's default. v3 reads v2's data (b is there) but not v1's;
// the non-transitive levels accept it, the transitive ones refuse it.
func TestTransitiveLevelsCheckEveryVersion(t *testing.T) {
	ctx := context.Background()
	reg := openRegistry(t, openPebble(t, t.TempDir()))
	v1 := rec(`{"name":"a","type":"int"}`)
	v2 := rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"int","default":1}`)
	v3 := rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"int"}`)
	for _, tc := range []struct {
		level Level
		ok    bool
	}{{Backward, true}, {BackwardTransitive, false}, {Full, true}, {FullTransitive, false}, {None, true}} {
		subj := "t-" + string(tc.level)
		if err := reg.SetLevel(ctx, subj, tc.level); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{v1, v2} {
			if _, err := reg.Register(ctx, subj, s); err != nil {
				t.Fatalf("%s: %v", tc.level, err)
			}
		}
		_, err := reg.Register(ctx, subj, v3)
		var re *Error
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &re) || re.Code != codeIncompatible)) {
			t.Errorf("%s: registering v3: %v, want ok=%v", tc.level, err, tc.ok)
		}
	}
	// Forward-transitive: old readers must read the new data. v1 {a, b},
	// v2 {a, b default 1} (v1 reads it: b is written), v3 {a} (v2 reads it
	// through b's default, v1 does not).
	w1 := rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"int"}`)
	w2 := rec(`{"name":"a","type":"int"}`, `{"name":"b","type":"int","default":1}`)
	w3 := rec(`{"name":"a","type":"int"}`)
	for _, tc := range []struct {
		level Level
		ok    bool
	}{{Forward, true}, {ForwardTransitive, false}} {
		subj := "f-" + string(tc.level)
		if err := reg.SetLevel(ctx, subj, tc.level); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{w1, w2} {
			if _, err := reg.Register(ctx, subj, s); err != nil {
				t.Fatalf("%s: %v", tc.level, err)
			}
		}
		if _, err := reg.Register(ctx, subj, w3); tc.ok != (err == nil) {
			t.Errorf("%s: registering w3: %v, want ok=%v", tc.level, err, tc.ok)
		}
	}
}

// TestGlobalLevelAndSubjectOverride: the global level applies to subjects
// without one of their own; deleting a subject's level falls back to it.
func TestGlobalLevelAndSubjectOverride(t *testing.T) {
	f := newFixture(t)
	f.want("GET", "/config", nil, 200, `{"compatibilityLevel":"BACKWARD"}`)
	f.want("PUT", "/config", map[string]string{"compatibility": "NONE"}, 200, `{"compatibility":"NONE"}`)
	f.want("GET", "/config", nil, 200, `{"compatibilityLevel":"NONE"}`)
	old, incompatible := rec(`{"name":"a","type":"int"}`), rec(`{"name":"a","type":"string"}`)
	f.want("POST", "/subjects/s/versions", schemaBody(old), 200, `{"id":1}`)
	f.want("POST", "/subjects/s/versions", schemaBody(incompatible), 200, `{"id":2}`)
	f.wantCode("GET", "/config/s", nil, 404, 40408)
	f.want("GET", "/config/s?defaultToGlobal=true", nil, 200, `{"compatibilityLevel":"NONE"}`)
	f.want("PUT", "/config/s", map[string]string{"compatibility": "full"}, 200, `{"compatibility":"FULL"}`)
	f.want("GET", "/config/s", nil, 200, `{"compatibilityLevel":"FULL"}`)
	third := rec(`{"name":"a","type":"boolean"}`)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(third), 409, 409)
	f.want("DELETE", "/config/s", nil, 200, `{"compatibilityLevel":"FULL"}`)
	f.want("POST", "/subjects/s/versions", schemaBody(third), 200, `{"id":3}`)
	f.want("DELETE", "/config", nil, 200, `{"compatibilityLevel":"NONE"}`)
	f.want("GET", "/config", nil, 200, `{"compatibilityLevel":"BACKWARD"}`)
	f.wantCode("PUT", "/config", map[string]string{"compatibility": "SIDEWAYS"}, 422, 42203)
	f.wantCode("PUT", "/config/s", map[string]string{"compatibility": ""}, 422, 42203)
	if status, _ := f.call("GET", "/config/s", nil); status != 404 {
		t.Fatalf("level survived its deletion")
	}
}
