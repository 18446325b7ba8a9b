package flights

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RotationSnapshots stores a rotation's state for the aggregate runtime's
// snapshots: version 2 in a binary layout, version 1 (JSON, what earlier
// builds wrote) still read. A planner's rotation is snapshotted every 250
// legs added; encoding its legs as JSON, times through MarshalJSON, was a
// twentieth of the server's CPU under the write load test.
//
// Version 2: the id, a flags byte (created, removed), the number of legs,
// then per leg its id, airline, suffix, origin, destination, day of
// origin and aircraft type (each a length and bytes), its number (a
// varint), and its departure and arrival (time.Time.MarshalBinary, a
// length and bytes: the instant and the zone offset, as JSON keeps them).
type RotationSnapshots struct{}

const (
	rotationSnapshotJSON   = 1
	rotationSnapshotBinary = 2
)

// EncodeState implements aggregate.SnapshotCodec.
func (RotationSnapshots) EncodeState(r Rotation) (int, []byte, error) {
	b := make([]byte, 0, 32+len(r.Legs)*96)
	b = appendString(b, r.ID)
	var flags byte
	if r.Created {
		flags |= 1
	}
	if r.Removed {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(r.Legs)))
	for i := range r.Legs {
		l := &r.Legs[i]
		for _, s := range [...]string{l.ID, l.Airline, l.Suffix, l.Origin, l.Destination, l.DayOfOrigin, l.AircraftType} {
			b = appendString(b, s)
		}
		b = binary.AppendVarint(b, int64(l.Number))
		for _, t := range [...]time.Time{l.Departure, l.Arrival} {
			tb, err := t.MarshalBinary()
			if err != nil {
				return 0, nil, fmt.Errorf("rotation %s: leg %s: %w", r.ID, l.ID, err)
			}
			b = appendString(b, string(tb))
		}
	}
	return rotationSnapshotBinary, b, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errSnapshotTruncated = errors.New("rotation snapshot: truncated")

type snapshotReader struct {
	b   []byte
	err error
}

func (r *snapshotReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errSnapshotTruncated, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapshotReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errSnapshotTruncated, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapshotReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err, r.b = errSnapshotTruncated, nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *snapshotReader) byte() byte {
	if len(r.b) == 0 {
		r.err = errSnapshotTruncated
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// DecodeState implements aggregate.SnapshotCodec.
func (RotationSnapshots) DecodeState(version int, data []byte) (Rotation, error) {
	var r Rotation
	switch version {
	case rotationSnapshotJSON:
		err := json.Unmarshal(data, &r)
		return r, err
	case rotationSnapshotBinary:
	default:
		return r, fmt.Errorf("rotation snapshot: version %d, want %d or %d", version, rotationSnapshotJSON, rotationSnapshotBinary)
	}
	rd := &snapshotReader{b: data}
	r.ID = string(rd.bytes())
	flags := rd.byte()
	r.Created, r.Removed = flags&1 != 0, flags&2 != 0
	n := rd.uvarint()
	// Each leg takes at least 10 bytes: a bound on n before allocating.
	if rd.err != nil || n > uint64(len(rd.b))/10 {
		return Rotation{}, errSnapshotTruncated
	}
	if n > 0 {
		r.Legs = make([]Leg, n)
	}
	for i := range r.Legs {
		l := &r.Legs[i]
		for _, s := range [...]*string{&l.ID, &l.Airline, &l.Suffix, &l.Origin, &l.Destination, &l.DayOfOrigin, &l.AircraftType} {
			*s = string(rd.bytes())
		}
		l.Number = int(rd.varint())
		for _, t := range [...]*time.Time{&l.Departure, &l.Arrival} {
			if err := t.UnmarshalBinary(rd.bytes()); err != nil && rd.err == nil {
				rd.err = fmt.Errorf("rotation snapshot: leg %d: %w", i, err)
			}
			if _, off := t.Zone(); off == 0 {
				*t = t.UTC() // as JSON gives back a zero offset ("Z")
			}
		}
		if rd.err != nil {
			return Rotation{}, rd.err
		}
	}
	if rd.err == nil && len(rd.b) != 0 {
		rd.err = fmt.Errorf("rotation snapshot: %d bytes after the last leg", len(rd.b))
	}
	if rd.err != nil {
		return Rotation{}, rd.err
	}
	return r, nil
}
