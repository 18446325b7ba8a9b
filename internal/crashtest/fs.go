package crashtest

import (
	"math/rand/v2"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is an in-memory file system for Pebble that remembers, for every file
// and directory, what was last synced, so that it can simulate a power
// loss. Pass it as Pebble's vfs.FS.
type FS struct {
	*vfs.MemFS
}

// NewFS returns an empty FS.
func NewFS() *FS {
	return &FS{vfs.NewCrashableMem()}
}

// Crash returns the file system a machine that lost power at this moment
// would find after a reboot: every file's data and every directory entry
// as of their last sync, and of what was written or created since, each
// 4 KiB block and each entry with probability keepUnsynced percent (0
// keeps nothing unsynced; rng may then be nil). Writes to f are held back
// while it copies, so the copy is one moment. f itself is unchanged, and
// whatever still has it open may go on writing to it.
func (f *FS) Crash(keepUnsynced int, rng *rand.Rand) *FS {
	return &FS{f.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepUnsynced, RNG: rng})}
}
