package flights

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"maps"
	"slices"
)

// Digest is a fingerprint of everything the view holds — rotations and
// their legs, airplanes and their assignments, airport minimum ground
// times, violations — and the log position it reflects. Two views that
// applied the same log to the same position have the same digest, however
// they were fed (a replica over HTTP or Kafka, a rebuild from the store),
// so comparing digests checks a replica without shipping its contents.
//
// It reads the whole view under the view's read lock (a second for a
// million legs), so it is computed at most once per view position and one
// at a time: concurrent and repeated requests share the answer instead of
// holding back the events waiting to be applied.
func (v *Validation) Digest() (string, uint64) {
	v.digestMu.Lock()
	defer v.digestMu.Unlock()
	if pos := v.Position(); v.digestSum != "" && v.digestPos == pos {
		return v.digestSum, pos
	}
	v.digestSum, v.digestPos = v.digest()
	v.digests.Add(1)
	return v.digestSum, v.digestPos
}

func (v *Validation) digest() (string, uint64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	h := sha256.New()
	enc := json.NewEncoder(h)
	put := func(kind string, x any) {
		h.Write([]byte(kind))
		_ = enc.Encode(x) // plain structs: they always encode
	}
	for _, id := range slices.Sorted(maps.Keys(v.rotations)) {
		r := v.rotations[id]
		put("rotation", id)
		put("plane", v.rotPlane[id])
		put("assigned", v.rotAssigned[id])
		for _, ref := range r.legs {
			put("leg", v.leg(v.at(ref)))
		}
	}
	for _, reg := range slices.Sorted(maps.Keys(v.airplanes)) {
		put("airplane", v.airplanes[reg])
	}
	for _, code := range slices.Sorted(maps.Keys(v.airportMGT)) {
		put("airport", []any{code, v.airportMGT[code]})
	}
	for _, id := range slices.Sorted(maps.Keys(v.violations)) {
		put("violation", v.violations[id])
	}
	return hexSum(h), v.checkpoint
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }
