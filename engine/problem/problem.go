// Package problem writes RFC 9457 problem details, the one shape every
// logbook HTTP error takes.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Details is an RFC 9457 problem.
type Details struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Extensions, set by some errors (a version conflict's actual version).
	Extra map[string]any `json:"-"`
}

// MarshalJSON flattens Extra into the object, as RFC 9457 extensions are.
// Keys come in sorted order (as encoding/json writes a map's). Without
// extensions — nearly every problem, among them a refused booking under
// load — the object is written directly, without building a map.
func (d Details) MarshalJSON() ([]byte, error) {
	if len(d.Extra) == 0 {
		b := make([]byte, 0, 64+len(d.Type)+len(d.Title)+len(d.Detail))
		b = append(b, '{')
		if d.Detail != "" {
			b = append(b, `"detail":`...)
			b = appendString(b, d.Detail)
			b = append(b, ',')
		}
		b = append(b, `"status":`...)
		b = strconv.AppendInt(b, int64(d.Status), 10)
		b = append(b, `,"title":`...)
		b = appendString(b, d.Title)
		b = append(b, `,"type":`...)
		b = appendString(b, d.Type)
		return append(b, '}'), nil
	}
	m := map[string]any{"type": d.Type, "title": d.Title, "status": d.Status}
	if d.Detail != "" {
		m["detail"] = d.Detail
	}
	for k, v := range d.Extra {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// appendString appends s as encoding/json encodes a string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// New returns a problem of the given status with the standard title.
func New(status int, detail string) Details {
	return Details{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
}

// Write sends d with its status.
func Write(w http.ResponseWriter, d Details) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(d.Status)
	_ = json.NewEncoder(w).Encode(d)
}

// Error writes a problem of the given status.
func Error(w http.ResponseWriter, status int, detail string) { Write(w, New(status, detail)) }
