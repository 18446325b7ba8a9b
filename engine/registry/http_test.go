package registry

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

const (
	userV1 = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"name","type":"string"}]}`
	// userV1 written differently: whitespace, attribute order, a redundant
	// namespace on the full name.
	userV1Again = `{ "fields" : [ { "type" : "string", "name" : "name" } ],
	                 "name" : "ex.User", "type" : "record" }`
	userV2 = `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
)

func TestRegisterAndRead(t *testing.T) {
	f := newFixture(t)
	f.want("GET", "/", nil, 200, `{}`)
	f.want("GET", "/schemas/types", nil, 200, `["AVRO"]`)
	f.want("GET", "/subjects", nil, 200, `[]`)
	f.want("POST", "/subjects/users-value/versions", schemaBody(userV1), 200, `{"id":1}`)
	// The same schema written differently is the same schema: same id, no
	// new version.
	f.want("POST", "/subjects/users-value/versions", schemaBody(userV1Again), 200, `{"id":1}`)
	f.want("GET", "/subjects/users-value/versions", nil, 200, `[1]`)
	f.want("POST", "/subjects/users-value/versions", map[string]any{"schema": userV2, "schemaType": "AVRO", "references": []any{}}, 200, `{"id":2}`)
	// Another subject, the same schema: the same id, its own version 1.
	f.want("POST", "/subjects/other/versions", schemaBody(userV2), 200, `{"id":2}`)

	norm1, _ := parseSchema(userV1)
	norm2, _ := parseSchema(userV2)
	f.want("GET", "/subjects", nil, 200, `["other","users-value"]`)
	f.want("GET", "/subjects?subjectPrefix=us", nil, 200, `["users-value"]`)
	f.want("GET", "/subjects/users-value/versions", nil, 200, `[1,2]`)
	f.want("GET", "/subjects/users-value/versions/1", nil, 200, jsonObj("subject", "users-value", "version", 1, "id", 1, "schema", norm1.text))
	f.want("GET", "/subjects/users-value/versions/latest", nil, 200, jsonObj("subject", "users-value", "version", 2, "id", 2, "schema", norm2.text))
	f.want("GET", "/subjects/users-value/versions/-1", nil, 200, jsonObj("subject", "users-value", "version", 2, "id", 2, "schema", norm2.text))
	if _, b := f.call("GET", "/subjects/users-value/versions/1/schema", nil); b != norm1.text {
		t.Fatalf("raw schema %s, want %s", b, norm1.text)
	}
	f.want("GET", "/schemas/ids/2", nil, 200, jsonObj("schema", norm2.text))
	if _, b := f.call("GET", "/schemas/ids/1/schema", nil); b != norm1.text {
		t.Fatalf("raw schema by id %s", b)
	}
	f.want("GET", "/schemas/ids/2/subjects", nil, 200, `["other","users-value"]`)
	f.want("GET", "/schemas/ids/2/versions", nil, 200, `[{"subject":"other","version":1},{"subject":"users-value","version":2}]`)
	f.want("POST", "/subjects/users-value", schemaBody(userV1Again), 200, jsonObj("subject", "users-value", "version", 1, "id", 1, "schema", norm1.text))
	f.want("POST", "/compatibility/subjects/users-value/versions/latest", schemaBody(userV1), 200, `{"is_compatible":true}`)
	f.want("POST", "/compatibility/subjects/users-value/versions", schemaBody(userV1), 200, `{"is_compatible":true}`)
	f.want("POST", "/compatibility/subjects/users-value/versions/1", schemaBody(`{"type":"record","name":"User","namespace":"ex","fields":[{"name":"name","type":"int"}]}`), 200, `{"is_compatible":false}`)
	// A subject name with a slash, escaped in the path.
	f.want("POST", "/subjects/a%2Fb/versions", schemaBody(`"string"`), 200, `{"id":3}`)
	f.want("GET", "/subjects/a%2Fb/versions/1", nil, 200, `{"subject":"a/b","version":1,"id":3,"schema":"\"string\""}`)
}

func jsonObj(kv ...any) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(quote(kv[i].(string)) + ":")
		switch v := kv[i+1].(type) {
		case string:
			b.WriteString(quote(v))
		case int:
			b.WriteString(itoa(v))
		}
	}
	return b.String() + "}"
}

func TestErrorCodes(t *testing.T) {
	f := newFixture(t)
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.wantCode("GET", "/subjects/nope/versions", nil, 404, 40401)
	f.wantCode("GET", "/subjects/nope/versions/1", nil, 404, 40401)
	f.wantCode("POST", "/subjects/nope", schemaBody(userV1), 404, 40401)
	f.wantCode("GET", "/subjects/s/versions/7", nil, 404, 40402)
	f.wantCode("GET", "/schemas/ids/99", nil, 404, 40403)
	f.wantCode("GET", "/schemas/ids/abc", nil, 404, 40403)
	f.wantCode("POST", "/subjects/s", schemaBody(userV2), 404, 40403)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(`{"type":"record","name":"X"`), 422, 42201)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(`{"type":"nosuchtype"}`), 422, 42201)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(`{"type":"record","name":"X","fields":[{"name":"a","type":"int","default":"x"}]}`), 422, 42201)
	f.wantCode("POST", "/subjects/s/versions", map[string]any{}, 422, 42201)
	f.wantCode("POST", "/subjects/s/versions", map[string]any{"schema": userV1, "schemaType": "PROTOBUF"}, 422, 42201)
	f.wantCode("POST", "/subjects/s/versions", map[string]any{"schema": userV1, "references": []any{map[string]any{"name": "x", "subject": "y", "version": 1}}}, 422, 42201)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(strings.Repeat(" ", 300<<10)+`"int"`), 422, 42201)
	f.wantCode("GET", "/subjects/s/versions/0", nil, 422, 42202)
	f.wantCode("GET", "/subjects/s/versions/first", nil, 422, 42202)
	f.wantCode("DELETE", "/subjects/s/versions/-7", nil, 422, 42202)
	f.wantCode("PUT", "/config", map[string]string{"compatibility": "BACKWARDS"}, 422, 42203)
	f.wantCode("PUT", "/mode", map[string]string{"mode": "SLEEPING"}, 422, 42204)
	f.wantCode("POST", "/subjects/"+strings.Repeat("x", 256)+"/versions", schemaBody(userV1), 422, 42208)
	f.wantCode("POST", "/subjects/s/versions", map[string]any{"schema": userV2, "id": 40}, 422, 42205)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(`{"type":"record","name":"User","namespace":"ex","fields":[{"name":"name","type":"long"}]}`), 409, 409)
	f.wantCode("GET", "/no/such/route", nil, 404, 404)
	f.wantCode("PATCH", "/subjects", nil, 405, 405)
	f.wantCode("GET", "/subjects/s/versions/1/nope", nil, 404, 404)
	f.wantCode("PUT", "/subjects/s/versions/1", nil, 405, 405)
	// Malformed JSON.
	req, _ := http.NewRequest("POST", f.srv.URL+"/registry/subjects/s/versions", strings.NewReader("{"))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 422 {
		t.Fatalf("malformed JSON: %d", resp.StatusCode)
	}
	// A body past the bound is refused without being read whole.
	big := map[string]any{"schema": strings.Repeat("x", 600<<10)}
	if status, _ := f.call("POST", "/subjects/s/versions", big); status != 413 {
		t.Fatalf("oversized body: %d, want 413", status)
	}
}

func TestModeReadOnly(t *testing.T) {
	f := newFixture(t)
	f.want("GET", "/mode", nil, 200, `{"mode":"READWRITE"}`)
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("PUT", "/mode", map[string]string{"mode": "READONLY"}, 200, `{"mode":"READONLY"}`)
	f.want("GET", "/mode", nil, 200, `{"mode":"READONLY"}`)
	f.wantCode("POST", "/subjects/s/versions", schemaBody(userV2), 422, 42205)
	f.wantCode("DELETE", "/subjects/s", nil, 422, 42205)
	f.want("GET", "/subjects/s/versions", nil, 200, `[1]`)
	f.wantCode("PUT", "/mode", map[string]string{"mode": "IMPORT"}, 422, 42205)
	f.want("PUT", "/mode", map[string]string{"mode": "READWRITE"}, 200, `{"mode":"READWRITE"}`)
	f.want("POST", "/subjects/s/versions", schemaBody(userV2), 200, `{"id":2}`)
}

func TestAuthorization(t *testing.T) {
	f := newFixture(t)
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	for _, tok := range []string{"", "wrong-token-123"} {
		if status, b := f.callAs(tok, "GET", "/subjects", nil); status != 401 || !strings.Contains(b, `"error_code":401`) {
			t.Fatalf("token %q: %d %s", tok, status, b)
		}
	}
	for _, tok := range []string{viewerToken, editorTok, adminToken} {
		if status, _ := f.callAs(tok, "GET", "/schemas/ids/1", nil); status != 200 {
			t.Fatalf("%s reading: %d", tok, status)
		}
		// Lookups and compatibility checks are reads, though POSTs.
		if status, _ := f.callAs(tok, "POST", "/subjects/s", schemaBody(userV1)); status != 200 {
			t.Fatalf("%s looking up: %d", tok, status)
		}
	}
	for _, tok := range []string{viewerToken, editorTok} {
		for _, c := range []struct{ method, path string }{{"POST", "/subjects/s/versions"}, {"DELETE", "/subjects/s"}, {"PUT", "/config"}, {"PUT", "/mode"}} {
			if status, b := f.callAs(tok, c.method, c.path, schemaBody(userV2)); status != 403 || !strings.Contains(b, `"error_code":403`) {
				t.Fatalf("%s %s %s: %d %s", tok, c.method, c.path, status, b)
			}
		}
	}
	// The token as the password of basic auth, the user name ignored.
	req, _ := http.NewRequest("POST", f.srv.URL+"/registry/subjects/s/versions", strings.NewReader(`{"schema":`+quote(userV2)+`}`))
	req.SetBasicAuth("anyone", adminToken)
	req.Header.Set("Content-Type", ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("basic auth: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", f.srv.URL+"/registry/subjects", nil)
	req.SetBasicAuth(viewerToken, "")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a token as the user name is not a password: %d", resp.StatusCode)
	}
}

func TestSoftAndPermanentDeletes(t *testing.T) {
	f := newFixture(t)
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("POST", "/subjects/s/versions", schemaBody(userV2), 200, `{"id":2}`)
	// Permanent first is refused.
	f.wantCode("DELETE", "/subjects/s/versions/1?permanent=true", nil, 404, 40407)
	f.wantCode("DELETE", "/subjects/s?permanent=true", nil, 404, 40405)
	// Soft-delete version 1: gone from listings, still readable by id and
	// with deleted=true.
	f.want("DELETE", "/subjects/s/versions/1", nil, 200, `1`)
	f.wantCode("DELETE", "/subjects/s/versions/1", nil, 404, 40406)
	f.want("GET", "/subjects/s/versions", nil, 200, `[2]`)
	f.want("GET", "/subjects/s/versions?deleted=true", nil, 200, `[1,2]`)
	f.wantCode("GET", "/subjects/s/versions/1", nil, 404, 40402)
	f.want("GET", "/subjects/s/versions/1?deleted=true", nil, 200, "")
	f.want("GET", "/schemas/ids/1", nil, 200, "")
	f.want("GET", "/schemas/ids/1/versions", nil, 200, `[]`)
	f.want("GET", "/schemas/ids/1/versions?deleted=true", nil, 200, `[{"subject":"s","version":1}]`)
	f.wantCode("POST", "/subjects/s", schemaBody(userV1), 404, 40403)
	// A deleted version is not checked against: a schema that cannot read
	// v1's data (age without a default) but can read v2's passes
	// BACKWARD_TRANSITIVE now.
	ageRequired := `{"type":"record","name":"User","namespace":"ex","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`
	f.want("PUT", "/config/t", map[string]string{"compatibility": "BACKWARD_TRANSITIVE"}, 200, "")
	f.want("POST", "/subjects/t/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("POST", "/subjects/t/versions", schemaBody(userV2), 200, `{"id":2}`)
	f.wantCode("POST", "/subjects/t/versions", schemaBody(ageRequired), 409, 409)
	f.want("DELETE", "/subjects/t/versions/1", nil, 200, `1`)
	f.want("POST", "/subjects/t/versions", schemaBody(ageRequired), 200, `{"id":3}`)
	f.want("DELETE", "/subjects/t", nil, 200, `[2,3]`)
	f.want("DELETE", "/subjects/t?permanent=true", nil, 200, `[1,2,3]`)
	// Permanently delete version 1: its schema is gone by id.
	f.want("DELETE", "/subjects/s/versions/1?permanent=true", nil, 200, `1`)
	f.wantCode("GET", "/schemas/ids/1", nil, 404, 40403)
	f.wantCode("GET", "/subjects/s/versions/1?deleted=true", nil, 404, 40402)
	// Registering it again gives it its old id back, as a new version.
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("GET", "/subjects/s/versions", nil, 200, `[2,3]`)

	// The whole subject.
	f.want("DELETE", "/subjects/s", nil, 200, `[2,3]`)
	f.wantCode("DELETE", "/subjects/s", nil, 404, 40404)
	f.want("GET", "/subjects", nil, 200, `[]`)
	f.want("GET", "/subjects?deleted=true", nil, 200, `["s"]`)
	f.wantCode("GET", "/subjects/s/versions", nil, 404, 40401)
	f.want("GET", "/schemas/ids/2", nil, 200, "")
	f.want("DELETE", "/subjects/s?permanent=true", nil, 200, `[2,3]`)
	f.want("GET", "/subjects?deleted=true", nil, 200, `[]`)
	f.wantCode("GET", "/schemas/ids/2", nil, 404, 40403)
	f.wantCode("DELETE", "/subjects/s", nil, 404, 40401)
	// A new subject of the same name starts again at version 1; ids stay.
	f.want("POST", "/subjects/s/versions", schemaBody(userV2), 200, `{"id":2}`)
	f.want("GET", "/subjects/s/versions", nil, 200, `[1]`)
	f.want("POST", "/subjects/s/versions", schemaBody(`"string"`), 409, "")
	f.want("PUT", "/config/s", map[string]string{"compatibility": "NONE"}, 200, "")
	f.want("POST", "/subjects/s/versions", schemaBody(`"string"`), 200, `{"id":4}`)
	f.want("DELETE", "/subjects/s/versions/latest", nil, 200, `2`)
	f.want("GET", "/subjects/s/versions/latest", nil, 200, jsonObj("subject", "s", "version", 1, "id", 2, "schema", mustNorm(t, userV2)))
}

func mustNorm(t *testing.T, s string) string {
	p, err := parseSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	return p.text
}

// TestRestartReplays: everything the registry held is back after the
// store is closed and reopened, ids continue where they stopped.
func TestRestartReplays(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := openPebble(t, dir)
	reg, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustID := func(reg *Registry, subj, s string, want int) {
		t.Helper()
		id, err := reg.Register(ctx, subj, s)
		if err != nil || id != want {
			t.Fatalf("register %s: id %d, %v; want %d", subj, id, err, want)
		}
	}
	mustID(reg, "a", userV1, 1)
	mustID(reg, "a", userV2, 2)
	mustID(reg, "b", `"long"`, 3)
	if err := reg.SetLevel(ctx, "b", FullTransitive); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetLevel(ctx, "", Forward); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.DeleteVersion(ctx, "a", 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.DeleteSubject(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.DeleteSubject(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetMode(ctx, ModeReadOnly); err != nil {
		t.Fatal(err)
	}
	reg.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store = openPebble(t, dir)
	defer store.Close()
	reg = openRegistry(t, store)
	if got := reg.Subjects(ctx, true, ""); strings.Join(got, ",") != "a" {
		t.Fatalf("subjects after restart: %v", got)
	}
	if vs, _ := reg.Versions(ctx, "a", false); len(vs) != 1 || vs[0] != 2 {
		t.Fatalf("versions: %v", vs)
	}
	if _, err := reg.SchemaByID(ctx, 1); err != nil {
		t.Fatalf("soft-deleted schema by id: %v", err)
	}
	if _, err := reg.SchemaByID(ctx, 3); err == nil {
		t.Fatal("permanently deleted schema still served")
	}
	if reg.Level("") != Forward || reg.Level("b") != Forward || reg.Mode() != ModeReadOnly {
		t.Fatalf("level %s, b %s, mode %s", reg.Level(""), reg.Level("b"), reg.Mode())
	}
	if err := reg.SetMode(ctx, ModeReadWrite); err != nil {
		t.Fatal(err)
	}
	mustID(reg, "c", `"bytes"`, 4)
	mustID(reg, "b", `"long"`, 3)
}
