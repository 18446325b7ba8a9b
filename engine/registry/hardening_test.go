package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadOnlyReturnsRegisteredSchema: in READONLY a schema already
// registered under the subject returns its id — the Kafka Avro
// publisher registers its schema at the start of every session, and a
// read-only registry must not stop it — while a new schema is refused.
func TestReadOnlyReturnsRegisteredSchema(t *testing.T) {
	f := newFixture(t)
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("PUT", "/mode", map[string]string{"mode": "READONLY"}, 200, `{"mode":"READONLY"}`)
	f.want("POST", "/subjects/s/versions", schemaBody(userV1), 200, `{"id":1}`)
	id, err := f.reg.Register(t.Context(), "s", userV1)
	if err != nil || id != 1 {
		t.Fatalf("Register of the registered schema in READONLY: %d, %v", id, err)
	}
	f.wantCode("POST", "/subjects/s/versions", schemaBody(userV2), 422, 42205)
	f.wantCode("POST", "/subjects/other/versions", schemaBody(userV1), 422, 42205)
}

// TestProtectedSubjectHardDelete: the bus's own subject (Protect) can be
// soft-deleted — its ids stay readable — but not permanently deleted,
// which would make the ids in published messages unreadable; other
// subjects can.
func TestProtectedSubjectHardDelete(t *testing.T) {
	f := newFixture(t)
	f.reg.Protect("events-value")
	f.want("POST", "/subjects/events-value/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("POST", "/subjects/other/versions", schemaBody(userV2), 200, `{"id":2}`)
	f.want("DELETE", "/subjects/events-value/versions/1", nil, 200, `1`)
	f.wantCode("DELETE", "/subjects/events-value/versions/1?permanent=true", nil, 422, 42205)
	f.want("POST", "/subjects/events-value/versions", schemaBody(userV1), 200, `{"id":1}`)
	f.want("DELETE", "/subjects/events-value", nil, 200, `[2]`)
	f.wantCode("DELETE", "/subjects/events-value?permanent=true", nil, 422, 42205)
	_, body := f.call("DELETE", "/subjects/events-value?permanent=true", nil)
	if !strings.Contains(body, "event bus") {
		t.Fatalf("the refusal does not say why: %s", body)
	}
	f.want("GET", "/schemas/ids/1", nil, http.StatusOK, "")
	f.want("DELETE", "/subjects/other", nil, 200, `[1]`)
	f.want("DELETE", "/subjects/other?permanent=true", nil, 200, `[1]`)
}

// deepSchema is an Avro schema of n arrays nested in one another.
func deepSchema(n int) string {
	return strings.Repeat(`{"type":"array","items":`, n) + `"int"` + strings.Repeat("}", n)
}

// TestDeepSchemaRefusedFast: a schema of 10,000 nested arrays (under
// the size limit) is refused before it is parsed, quickly, as an invalid
// schema (422, 42201) — on the read routes too, which any token may
// call; a schema nested to the limit is still taken.
func TestDeepSchemaRefusedFast(t *testing.T) {
	f := newFixture(t)
	deep := deepSchema(10_000)
	if len(deep) > 256<<10 {
		t.Fatalf("the schema is %d bytes, over the size limit", len(deep))
	}
	for _, path := range []string{"/compatibility/subjects/s/versions", "/subjects/s", "/subjects/s/versions"} {
		start := time.Now()
		f.wantCode("POST", path, schemaBody(deep), 422, 42201)
		if d := time.Since(start); d > time.Second {
			t.Errorf("POST %s: refusing a 10,000-deep schema took %v", path, d)
		}
	}
	_, body := f.call("POST", "/subjects/s/versions", schemaBody(deep))
	if !strings.Contains(body, "nested") {
		t.Fatalf("the refusal does not say why: %s", body)
	}
	f.want("POST", "/subjects/s/versions", schemaBody(deepSchema(60)), 200, `{"id":1}`)
}

// TestParsesBounded: with Options.MaxParses parses in flight, the next
// waits for a turn and gives up (503, 50002) when its context ends
// instead of adding to the CPU the others take; once a turn frees it
// parses.
func TestParsesBounded(t *testing.T) {
	f := newFixture(t)
	for range cap(f.reg.parses) {
		f.reg.parses <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := f.reg.Check(ctx, "s", 0, userV1)
	var re *Error
	if !errors.As(err, &re) || re.Status != 503 || re.Code != 50002 {
		t.Fatalf("a check with every parse slot taken: %v, want 503 50002", err)
	}
	<-f.reg.parses
	if _, err := f.reg.Check(t.Context(), "s", 0, userV1); err != nil {
		t.Fatal(err)
	}
}

// TestWritesNeedJSONContentType: a POST or PUT whose body is not
// declared JSON — what a cross-site HTML form or a no-preflight fetch
// sends (form encodings, text/plain, none at all) — is refused with 415
// in Confluent's error shape, before anything is done; the content types
// Confluent's clients and franz-go's send are taken.
func TestWritesNeedJSONContentType(t *testing.T) {
	f := newFixture(t)
	send := func(method, path, ct, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+"/registry"+path, strings.NewReader(body))
		req.SetBasicAuth("", adminToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	reg := `{"schema":` + quote(userV1) + `}`
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/subjects/s/versions", reg},
			{"POST", "/subjects/s", reg},
			{"POST", "/compatibility/subjects/s/versions", reg},
			{"PUT", "/config", `{"compatibility":"NONE"}`},
			{"PUT", "/mode", `{"mode":"READONLY"}`},
		} {
			status, body := send(c.method, c.path, ct, c.body)
			if status != 415 || !strings.Contains(body, `"error_code":415`) {
				t.Errorf("%s %s with Content-Type %q: %d %s, want 415", c.method, c.path, ct, status, body)
			}
		}
	}
	f.want("GET", "/mode", nil, 200, `{"mode":"READWRITE"}`)
	f.want("GET", "/subjects", nil, 200, `[]`)
	for i, ct := range []string{ContentType, "application/vnd.schemaregistry+json", "application/json", "application/json; charset=utf-8", "application/octet-stream"} {
		status, body := send("POST", "/subjects/s"+itoa(i)+"/versions", ct, reg)
		if status != 200 {
			t.Errorf("POST with Content-Type %q: %d %s", ct, status, body)
		}
	}
}
