package registry

import (
	"net/http"
	"strings"
	"testing"
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
