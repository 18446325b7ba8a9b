package window

import (
	"testing"
	"time"
	"unsafe"
)

// TestStateChunksPerLevel checks that newState takes each level's states
// from chunks of that level only. A chunk is freed when its last state
// is: were a day's state made in the same chunk as the minutes' states
// around it, each new key would keep a chunk of closed minutes alive for
// a day. With levels interleaved, a level's states must still be made
// one after the other in its own chunk.
func TestStateChunksPerLevel(t *testing.T) {
	def := testDef("chunks", Tumbling(time.Minute), time.Minute, time.Hour, 24*time.Hour)
	a := openAgg(t, def)
	var prev [3]*state
	var made [3]int
	for i := range 2000 {
		level := uint8(i % 3)
		if i%7 == 0 {
			level = 2 // a new key's day, now and then, among the minutes
		}
		s := a.newState(level, 0)
		// The first state of each chunk of 256 starts a new chunk; every
		// other one lies right after the level's previous state.
		if made[level]%256 != 0 && uintptr(unsafe.Pointer(s)) != uintptr(unsafe.Pointer(prev[level]))+unsafe.Sizeof(state{}) {
			t.Fatalf("state %d of level %d is not next to the level's previous one", made[level], level)
		}
		prev[level] = s
		made[level]++
	}
}
