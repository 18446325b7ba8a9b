package problem

import (
	"encoding/json"
	"testing"
)

// The direct encoding of a problem without extensions is byte for byte
// what encoding/json writes for the same object as a map (sorted keys,
// the same escaping), and extensions still flatten into it.
func TestMarshalJSON(t *testing.T) {
	for _, d := range []Details{
		New(409, "ticket is already booked"),
		New(404, ""),
		{Type: "urn:x:<&>", Title: "T \"q\" \u2028", Status: 400, Detail: "bad\n\tinput é <script>"},
		{Type: "about:blank", Title: "Conflict", Status: 409, Detail: "v", Extra: map[string]any{"actual": 3, "type": "ignored"}},
	} {
		got, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
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
		want, _ := json.Marshal(m)
		if string(got) != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", d, got, want)
		}
	}
}
