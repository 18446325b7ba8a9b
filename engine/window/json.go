package window

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// ExtractJSON returns an Extract for events whose payload is a JSON
// object: each dimension, value and distinct field of def is read from
// the field of the same name, a dotted name being a path into nested
// objects ("sender.id"). The event time is the field timeField — an
// RFC 3339 string or a number of Unix milliseconds — or, with timeField
// empty, the event's commit time. Only events of the given types are
// aggregated (none given: every event).
//
// A dimension that is missing is "", one that is not a string is its JSON
// text. An event whose payload is not an object, or that lacks the time
// or a value field (or has one that is not a number), is skipped: there
// is nothing to count it as. A service with its own encoding, or that
// needs speed (decoding JSON costs a few microseconds an event), writes
// its own Extract.
func ExtractJSON(def Definition, timeField string, types ...string) func(*eventstore.Event, *Record) bool {
	split := func(names []string) [][]string {
		out := make([][]string, len(names))
		for i, n := range names {
			out[i] = strings.Split(n, ".")
		}
		return out
	}
	dims, values, distinct := split(def.Dims), split(def.Values), split(def.Distinct)
	var timePath []string
	if timeField != "" {
		timePath = strings.Split(timeField, ".")
	}
	return func(ev *eventstore.Event, r *Record) bool {
		if len(types) > 0 && !slices.Contains(types, ev.Type) {
			return false
		}
		var obj map[string]any
		if err := json.Unmarshal(ev.Data, &obj); err != nil || obj == nil {
			return false
		}
		if timePath == nil {
			r.Time = ev.Time
		} else {
			switch t := lookup(obj, timePath).(type) {
			case string:
				pt, err := time.Parse(time.RFC3339Nano, t)
				if err != nil {
					return false
				}
				r.Time = pt
			case float64:
				r.Time = time.UnixMilli(int64(t))
			default:
				return false
			}
		}
		for i, p := range dims {
			r.Dims[i] = text(lookup(obj, p))
		}
		for i, p := range values {
			v, ok := lookup(obj, p).(float64)
			if !ok {
				return false
			}
			r.Values[i] = v
		}
		for i, p := range distinct {
			r.Distinct[i] = text(lookup(obj, p))
		}
		return true
	}
}

func lookup(obj map[string]any, path []string) any {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}
