package httpreplica

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzStream feeds the replica's stream decoder what a primary (or
// anything in its place) could send. It must not panic; it must end with
// io.EOF, a cut last line, a malformed line or an overlong one, never
// another error; every event it returns has a position.
func FuzzStream(f *testing.F) {
	ev := `{"stream":"s","seq":1,"position":1,"id":"0123456789abcdef0123456789abcdef","type":"T","version":0,"tags":[],"meta":{},"data":{},"time":"2024-01-01T00:00:00Z"}`
	f.Add([]byte(ev + "\n\n" + `{"heartbeat":true}` + "\n"))
	f.Add([]byte(ev + "\r\n" + ev[:40]))
	f.Add([]byte(`{"position":2,"id":"x"}` + "\n"))
	f.Add([]byte(`{"position":3,"id":"0123456789abcdef0123456789abcdef","data_base64":"AAEC"}` + "\n"))
	f.Add([]byte("not json\n"))
	f.Add([]byte(`{"removed_through":7}` + "\n" + ev + "\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		st := &stream{body: io.NopCloser(bytes.NewReader(body)), r: bufio.NewReaderSize(bytes.NewReader(body), 16)}
		for range len(body) + 1 {
			ev, removed, err := st.next()
			switch {
			case err == nil && removed > 0:
				continue
			case err == nil:
				if ev.Position == 0 {
					t.Fatalf("event without a position: %+v", ev)
				}
				continue
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errMalformed), errors.Is(err, ErrLineTooLong):
				return
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		t.Fatal("more events than bytes")
	})
}
