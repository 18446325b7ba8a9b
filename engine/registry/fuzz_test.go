package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// nestedRecords is an Avro record nested depth times, each level with width
// fields beside the nested one.
func nestedRecords(depth, width int) string {
	var b strings.Builder
	for i := range depth {
		fmt.Fprintf(&b, `{"type":"record","name":"R%d","fields":[`, i)
		for j := range width {
			fmt.Fprintf(&b, `{"name":"f%d","type":"long"},`, j)
		}
		b.WriteString(`{"name":"next","type":["null",`)
	}
	b.WriteString(`"string"`)
	for range depth {
		b.WriteString(`],"default":null}]}`)
	}
	return b.String()
}

// FuzzSchemas registers arbitrary schemas — as text, or built deep and
// wide from two numbers — under a few subjects and checks a second one's
// compatibility with them, as an admin. Whatever the schemas: no panic,
// no 5xx, every error in the registry's error shape (error_code and
// message, the status's code or a Confluent code of it), an answer within
// two seconds.
func FuzzSchemas(f *testing.F) {
	store := openPebble(f, f.TempDir())
	f.Cleanup(func() { store.Close() })
	reg := openRegistry(f, store)
	h := Handler(reg, testTokens(f))
	rec := `{"type":"record","name":"A","fields":[{"name":"a","type":"long"}]}`
	recB := `{"type":"record","name":"A","fields":[{"name":"a","type":"long"},{"name":"b","type":"string","default":""}]}`
	for _, s := range []struct{ a, b string }{
		{rec, recB},
		{recB, rec},
		{`"string"`, `"long"`},
		{`{"type":"enum","name":"E","symbols":["A","B"]}`, `{"type":"enum","name":"E","symbols":["A"]}`},
		{`{"type":"array","items":{"type":"map","values":"bytes"}}`, `["null","int"]`},
		{`{"type":"fixed","name":"F","size":16}`, `{"type":"fixed","name":"F","size":-1}`},
		{`{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`, rec},
		{`{"type":"record","name":"A","fields":[{"name":"a","type":"nope"}]}`, `{`},
		{`[`, `null`},
	} {
		f.Add(s.a, s.b, uint16(0), uint16(0), uint8(0))
	}
	f.Add("", "", uint16(64), uint16(2), uint8(1))
	f.Add("", "", uint16(5000), uint16(1), uint8(2))
	f.Add("", "", uint16(3), uint16(3000), uint8(3))
	f.Fuzz(func(t *testing.T, a, b string, depth, width uint16, subject uint8) {
		if depth > 0 {
			a = nestedRecords(int(depth%20000), int(width%5000))
			b = nestedRecords(int(depth%20000)+1, int(width%5000))
		}
		sub := fmt.Sprintf("s%d", subject%4)
		for _, c := range []struct{ method, path, schema string }{
			{"POST", "/subjects/" + sub + "/versions", a},
			{"POST", "/compatibility/subjects/" + sub + "/versions/latest", b},
			{"POST", "/compatibility/subjects/" + sub + "/versions?verbose=true", b},
			{"POST", "/subjects/" + sub, a},
		} {
			body, _ := json.Marshal(map[string]string{"schema": c.schema})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			req := httptest.NewRequestWithContext(ctx, c.method, c.path, bytes.NewReader(body))
			req.Header.Set("Content-Type", ContentType)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			w := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(w, req)
			cancel()
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("%s %s of a %d-byte schema: %v", c.method, c.path, len(c.schema), el)
			}
			if w.Code >= 500 {
				t.Fatalf("%s %s %.200q: %d %s", c.method, c.path, c.schema, w.Code, w.Body)
			}
			if w.Code >= 400 {
				var e struct {
					Code    int    `json:"error_code"`
					Message string `json:"message"`
				}
				if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Message == "" || (e.Code != w.Code && e.Code/100 != w.Code) {
					t.Fatalf("%s %s: %d answered %s, want the registry's error shape", c.method, c.path, w.Code, w.Body)
				}
			}
		}
	})
}
