package pebblekit

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/priority"
)

// SpareWALs wraps the file system of a Pebble database in dir so that a
// new write-ahead log is, when one is ready, a spare: a file of walBytes
// zeros already written and synced, renamed to the log's name.
//
// Why: Pebble makes a new log by creating a file and preallocating its
// space (fallocate with FALLOC_FL_KEEP_SIZE). Each synced write at the end
// of such a file grows it and turns unwritten blocks into written ones,
// so fdatasync must commit the file system's journal too. On this
// project's test machine (ext4 on a virtual disk) a 2 KB write with
// fdatasync took 136 µs and 75 µs of CPU that way, 90 µs and 49 µs when it
// overwrote blocks already written. Pebble reuses the files of logs it no
// longer needs for that reason, but a new database has none, and the
// files of its first, small logs are small: a log made from one grows
// once past the old file's end.
//
// So: once the database has written a sixteenth of walBytes to its logs
// (a database that writes little, as most tests, never pays for a
// spare), a spare is written in the background, a MiB and a sync at a
// time, yielding to foreground work (engine/priority), and from then on
// every new log asks for the next one (one that failed, for want of disk
// space or otherwise, is tried again at the next log). A log made while a
// spare is ready takes it, also in place of a reused file smaller than
// the spare (that file is removed).
//
// Recovery reads such a log as it reads one of Pebble's reused logs:
// the newest log's replay ends at its first zeroed chunk, after reading
// through the rest of the zeros (up to walBytes, once per open); an older
// log always ends in Pebble's end-of-log trailer, written when Pebble
// closes it before making the next, and the logs replayed at an open are
// flushed before a new one is made. A spare half written when the process
// stops is removed at the next open (Tidy); a complete one becomes the
// next log.
//
// The price: walBytes of disk beside the database; a log's worth of
// writes for each spare until Pebble's reused files are all spare-sized;
// and logs of walBytes in a checkpoint of a young database.
type SpareWALs struct {
	vfs.FS
	dir      string
	walBytes int64
	logger   *slog.Logger

	mu      sync.Mutex
	state   spareState
	closed  bool
	stop    chan struct{}
	writers sync.WaitGroup

	// left counts down the bytes written to logs; once it reaches zero
	// the database is busy, and a spare is kept ready from then on.
	left atomic.Int64
	busy atomic.Bool
	// For tests: logs made from a spare, and those of them made in place
	// of a smaller reused file.
	used, replaced atomic.Uint64
}

type spareState uint8

const (
	spareNone spareState = iota
	sparePreparing
	spareReady
)

// SpareName is the spare's file name in the database's directory; a
// spare being written has SpareName+".tmp".
const SpareName = "logbook-wal-spare"

// NewSpareWALs returns fs with spare logs for the database in dir, each
// of walBytes (Pebble preallocates MemTableSize plus a tenth for a log;
// WALBytes gives that). A complete spare of that size already in dir is
// used for the first log. It changes nothing in dir: the database may be
// another process's until Pebble has locked it. Call Tidy once it has.
func NewSpareWALs(fs vfs.FS, dir string, walBytes int64, logger *slog.Logger) (*SpareWALs, error) {
	if logger == nil {
		logger = slog.Default()
	}
	s := &SpareWALs{FS: fs, dir: filepath.Clean(dir), walBytes: walBytes, logger: logger, stop: make(chan struct{})}
	s.left.Store(walBytes / 16)
	switch fi, err := fs.Stat(s.path(SpareName)); {
	case err == nil && fi.Size() == walBytes:
		s.state = spareReady
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	return s, nil
}

// Tidy removes what an earlier process left and this one will not use: a
// half-written spare, or a spare of another size. Call it once the
// database is open, and so locked for this process. A nil SpareWALs has
// nothing to tidy.
func (s *SpareWALs) Tidy() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sparePreparing {
		if err := removeIfExists(s.FS, s.path(SpareName+".tmp")); err != nil {
			return err
		}
	}
	if s.state == spareNone {
		if err := removeIfExists(s.FS, s.path(SpareName)); err != nil {
			return err
		}
	}
	return nil
}

// WALBytes is the size Pebble preallocates for each write-ahead log of a
// database with memtables of memTableBytes (pebble.DB's
// walPreallocateSize, v2.1).
func WALBytes(memTableBytes uint64) int64 {
	return int64(memTableBytes + memTableBytes/10)
}

// Close stops a spare being written (its half is removed) and waits for
// its writer. A complete spare stays for the next open. A nil
// SpareWALs has nothing to close.
func (s *SpareWALs) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.writers.Wait()
}

func (s *SpareWALs) path(name string) string { return s.FS.PathJoin(s.dir, name) }

func (s *SpareWALs) isLog(name string) bool {
	return strings.HasSuffix(name, ".log") && filepath.Clean(s.FS.PathDir(name)) == s.dir
}

// Create makes a write-ahead log from the spare if one is ready, else a
// fresh file.
func (s *SpareWALs) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !s.isLog(name) {
		return s.FS.Create(name, category)
	}
	if f, ok := s.useSpare(name, category); ok {
		return s.track(f), nil
	}
	f, err := s.FS.Create(name, category)
	if err != nil {
		return f, err
	}
	return s.track(f), nil
}

// ReuseForWrite is how Pebble makes a log from the file of one it no
// longer needs. A file smaller than a spare would grow as the log is
// written: then the spare, if ready, is used instead, and the old file
// removed (Pebble allows ReuseForWrite to, and syncs the directory
// after it).
func (s *SpareWALs) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !s.isLog(newname) {
		return s.FS.ReuseForWrite(oldname, newname, category)
	}
	if fi, err := s.FS.Stat(oldname); err == nil && fi.Size() < s.walBytes {
		if f, ok := s.useSpare(newname, category); ok {
			s.replaced.Add(1)
			if err := s.FS.Remove(oldname); err != nil {
				s.logger.Warn("pebble: could not remove a log file replaced by the spare; the next open removes it", "file", oldname, "err", err)
			}
			return s.track(f), nil
		}
	}
	f, err := s.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return f, err
	}
	return s.track(f), nil
}

// useSpare renames the spare, if one is ready, to name and opens it.
func (s *SpareWALs) useSpare(name string, category vfs.DiskWriteCategory) (vfs.File, bool) {
	s.mu.Lock()
	ready := s.state == spareReady && !s.closed
	if ready {
		s.state = spareNone
	}
	s.mu.Unlock()
	if !ready {
		return nil, false
	}
	f, err := s.FS.ReuseForWrite(s.path(SpareName), name, category)
	if err != nil {
		s.logger.Warn("pebble: could not use the spare write-ahead log", "log", name, "err", err)
		return nil, false
	}
	s.used.Add(1)
	return f, true
}

// track follows a new log. Once the database has written a sixteenth of
// a spare's size to its logs it is busy, and every new log asks for the
// next spare (a spare that failed is tried again at the next log);
// before, the log counts its writes.
func (s *SpareWALs) track(f vfs.File) vfs.File {
	if s.busy.Load() {
		s.prepare()
		return f
	}
	return &watchedLog{File: f, s: s}
}

type watchedLog struct {
	vfs.File
	s *SpareWALs
}

func (f *watchedLog) Write(p []byte) (int, error) {
	if s := f.s; !s.busy.Load() && s.left.Add(-int64(len(p))) <= 0 && s.busy.CompareAndSwap(false, true) {
		s.prepare()
	}
	return f.File.Write(p)
}

// prepare starts writing a spare unless one is ready or being written.
func (s *SpareWALs) prepare() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != spareNone || s.closed {
		return
	}
	s.state = sparePreparing
	s.writers.Add(1)
	go func() {
		defer s.writers.Done()
		err := s.write()
		s.mu.Lock()
		s.state = spareNone
		if err == nil {
			s.state = spareReady
		}
		s.mu.Unlock()
		if err != nil && !errors.Is(err, errSpareStopped) {
			s.logger.Warn("pebble: could not write a spare write-ahead log; the next log grows as it is written, and asks again", "dir", s.dir, "err", err)
		}
	}()
}

var errSpareStopped = errors.New("stopped")

// minFreeSpares: a spare is written only with this many spares' worth of
// space free on its file system.
const minFreeSpares = 4

// write writes walBytes of zeros to SpareName.tmp, syncs it, renames it
// to SpareName and syncs the directory.
func (s *SpareWALs) write() (err error) {
	// A spare must not take the space the database's own writes need.
	if du, err := s.FS.GetDiskUsage(s.dir); err == nil && du.AvailBytes < uint64(minFreeSpares*s.walBytes) {
		return fmt.Errorf("%d bytes free, under %d spares' worth", du.AvailBytes, minFreeSpares)
	}
	tmp := s.path(SpareName + ".tmp")
	f, err := s.FS.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	open := true
	defer func() {
		if err != nil {
			if open {
				_ = f.Close()
			}
			_ = s.FS.Remove(tmp)
		}
	}()
	zeros := make([]byte, 1<<20)
	var y priority.Yielder
	for left := s.walBytes; left > 0; {
		select {
		case <-s.stop:
			return errSpareStopped
		default:
		}
		y.Yield()
		n := min(int64(len(zeros)), left)
		clear(zeros) // a Write may scribble on its buffer (Pebble's MemFS does, in invariant builds)
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
		// Sync a chunk at a time: one sync of the whole spare would
		// queue all of it on the disk at once, ahead of the log's
		// own syncs.
		if err := f.SyncData(); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	open = false
	if err := f.Close(); err != nil {
		return err
	}
	if err := s.FS.Rename(tmp, s.path(SpareName)); err != nil {
		return err
	}
	// A spare whose name is synced is found at the next open.
	d, err := s.FS.OpenDir(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func removeIfExists(fs vfs.FS, name string) error {
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
