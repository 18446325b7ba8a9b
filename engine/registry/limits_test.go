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

// wideSchema is a record of n fields whose names are padded so that the
// schema is about size bytes long.
func wideSchema(size, n int) string {
	const field = `{"name":"f%06d%s","type":["null","string"],"default":null}`
	pad := max(0, (size-64)/n-len(fmt.Sprintf(field, 0, ""))-1)
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"W","fields":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, field, i, strings.Repeat("x", pad))
	}
	b.WriteString("]}")
	return b.String()
}

// Requests at every limit at once are answered in bounded time and
// memory: registering the largest schema (MaxSchemaBytes, a record with
// as many fields as MaxFieldBytes lets it have), checking the
// compatibility of another as large against every version, verbose, and
// looking it up — within 10 seconds each, allocating at most 256 MiB. A
// compatibility check is what costs: hamba/avro's checker writes a
// record out by appending field after field to one string, about
// fields × bytes / 2 for each record it fingerprints; before
// MaxFieldBytes, a check of two 256 KiB records of 4,000 fields
// allocated about 900 MiB, and any viewer could ask for several at once.
func TestRequestsAtEveryLimit(t *testing.T) {
	store := openPebble(t, t.TempDir())
	defer store.Close()
	reg := openRegistry(t, store)
	h := Handler(reg, testTokens(t))
	size := reg.opts.MaxSchemaBytes
	fields := int(reg.opts.MaxFieldBytes/int64(size)) - 16 // the normal form is a little longer
	a, b := wideSchema(size, fields), wideSchema(size-64, fields)
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
		{"register the largest schema", "/subjects/wide-value/versions", a, 256 << 20},
		{"check another against every version", "/compatibility/subjects/wide-value/versions?verbose=true", b, 256 << 20},
		{"register the other", "/subjects/wide-value/versions", b, 256 << 20},
		{"look the first up", "/subjects/wide-value", a, 256 << 20},
	} {
		httpfuzz.Bounded(t, fmt.Sprintf("%s (%d bytes)", c.what, len(c.schema)), 10*time.Second, c.maxAlloc, func() {
			if code, body := call(c.path, c.schema); code != http.StatusOK {
				t.Fatalf("%s: %d %.300s", c.what, code, body)
			}
		})
	}
	if code, _ := call("/subjects/wide-value/versions", wideSchema(size+1024, fields)); code != http.StatusRequestEntityTooLarge && code != http.StatusUnprocessableEntity {
		t.Errorf("a schema beyond MaxSchemaBytes: %d, want 413 or 422", code)
	}
	// Within MaxSchemaBytes but with 4,000 short fields: refused before
	// any check, by anyone, as a compatibility check would cost about
	// 1 GiB.
	wide := wideSchema(size, 4000)
	for _, path := range []string{"/subjects/wide-value/versions", "/compatibility/subjects/wide-value/versions", "/subjects/wide-value"} {
		httpfuzz.Bounded(t, "refuse 4,000 fields at "+path, 10*time.Second, 128<<20, func() {
			code, body := call(path, wide)
			if code != http.StatusUnprocessableEntity || !strings.Contains(body, "fields times bytes") {
				t.Errorf("POST %s with a record of 4,000 fields in %d bytes: %d %.300s, want 422 naming the limit", path, len(wide), code, body)
			}
		})
	}
}
