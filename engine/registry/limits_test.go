package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/httpfuzz"
)

// wideSchema is a record of as many long fields as fit in size bytes.
func wideSchema(size int) string {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"W","fields":[`)
	for i := 0; ; i++ {
		f := fmt.Sprintf(`{"name":"f%06d","type":["null","string"],"default":null}`, i)
		if b.Len()+len(f)+3 > size {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f)
	}
	b.WriteString("]}")
	return b.String()
}

// Requests at every limit at once are answered in bounded time and
// memory: registering the largest schema (MaxSchemaBytes, a record of
// thousands of fields), checking the compatibility of another as large
// against every version, verbose, and looking it up — within 10 seconds
// each. Registering or looking up allocates at most 128 MiB, 512 times
// the schema; a compatibility check of two such records costs far more,
// in hamba/avro's checker, which fingerprints a record schema by writing
// it out whole for each comparison it makes: about 900 MiB for records
// of 4,000 fields. That is bounded (by MaxSchemaBytes), and this test
// holds it under 1.5 GiB, but it is a reason to keep the checks that run
// at once few.
func TestRequestsAtEveryLimit(t *testing.T) {
	store := openPebble(t, t.TempDir())
	defer store.Close()
	reg := openRegistry(t, store)
	h := Handler(reg, testTokens(t))
	size := reg.opts.MaxSchemaBytes
	a, b := wideSchema(size), wideSchema(size-64)
	call := func(path, schema string) (int, string) {
		body, _ := json.Marshal(map[string]string{"schema": schema})
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ContentType)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	for _, c := range []struct {
		what, path, schema string
		maxAlloc           uint64
	}{
		{"register the largest schema", "/subjects/wide-value/versions", a, 128 << 20},
		{"check another against every version", "/compatibility/subjects/wide-value/versions?verbose=true", b, 1536 << 20},
		{"register the other", "/subjects/wide-value/versions", b, 1536 << 20},
		{"look the first up", "/subjects/wide-value", a, 128 << 20},
	} {
		httpfuzz.Bounded(t, fmt.Sprintf("%s (%d bytes)", c.what, len(c.schema)), 10*time.Second, c.maxAlloc, func() {
			if code, body := call(c.path, c.schema); code != http.StatusOK {
				t.Fatalf("%s: %d %.300s", c.what, code, body)
			}
		})
	}
	if code, _ := call("/subjects/wide-value/versions", wideSchema(size+1024)); code != http.StatusRequestEntityTooLarge && code != http.StatusUnprocessableEntity {
		t.Errorf("a schema beyond MaxSchemaBytes: %d, want 413 or 422", code)
	}
}
