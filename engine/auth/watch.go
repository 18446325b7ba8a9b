package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchOptions tune Watch; the zero value is the default.
type WatchOptions struct {
	// Settle is how long the file must be quiet after a change before it
	// is read, so that an editor's several writes are read once, whole.
	// Default 100ms.
	Settle time.Duration
	// Poll is how often the file is read when the operating system
	// cannot tell of changes (no inotify watch to spare). Default 2s.
	Poll time.Duration
}

// MaxTokenFileBytes bounds a token file Watch reads.
const MaxTokenFileBytes = 4 << 20

// Watch keeps t's tokens those of file, which t was loaded from, until ctx
// ends: the file is read again when it or its directory changes (an editor
// or a configuration manager replaces it by a rename) and on SIGHUP. A
// file that fails to parse, or holds no token while t has no verifier,
// leaves t as it was, and the reason is logged; so does a file that cannot
// be read. The file's tokens must have roles t knows (NewTokens).
//
// Watch returns once it watches; it fails only if file's directory cannot
// be read. Where the system cannot watch files, it reads file every
// WatchOptions.Poll instead.
func (t *Tokens) Watch(ctx context.Context, file string, log *slog.Logger, o WatchOptions) error {
	if o.Settle <= 0 {
		o.Settle = 100 * time.Millisecond
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &watcher{t: t, file: file, log: log.With("tokens", file)}
	if b, err := w.read(); err == nil {
		w.last = sha256.Sum256(b)
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	fw, err := newFSWatcher()
	if err == nil {
		if err = fw.Add(filepath.Dir(file)); err != nil {
			fw.Close()
		}
	}
	var poll <-chan time.Time
	if err != nil {
		if _, serr := os.Stat(filepath.Dir(file)); serr != nil {
			return fmt.Errorf("tokens: watch %s: %w", file, serr)
		}
		w.log.Warn("cannot watch the token file for changes; reading it every poll interval instead", "poll", o.Poll, "err", err)
		tick := time.NewTicker(o.Poll)
		poll = tick.C
		context.AfterFunc(ctx, tick.Stop)
	} else {
		events, errs = fw.Events, fw.Errors
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		if fw != nil && events != nil {
			defer fw.Close()
		}
		settle := time.NewTimer(o.Settle)
		settle.Stop()
		for {
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case <-events:
				// Any change in the directory: the file may be a
				// symbolic link whose target was swapped. reload skips
				// a file whose contents are unchanged.
				settle.Reset(o.Settle)
			case err := <-errs:
				w.log.Warn("watching the token file", "err", err)
			case <-settle.C:
				w.reload("changed")
			case <-poll:
				w.reload("changed")
			case <-hup:
				w.last = [32]byte{} // SIGHUP reads the file even if unchanged
				w.reload("SIGHUP")
			}
		}
	}()
	return nil
}

// systemWatch is false in tests that watch without the system's notices.
var systemWatch = true

func newFSWatcher() (*fsnotify.Watcher, error) {
	if !systemWatch {
		return nil, errors.New("file notices off")
	}
	return fsnotify.NewWatcher()
}

type watcher struct {
	t    *Tokens
	file string
	log  *slog.Logger
	last [32]byte // the digest of the contents last loaded
}

func (w *watcher) read() ([]byte, error) {
	f, err := os.Open(w.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(f, MaxTokenFileBytes+1))
	if err != nil {
		return nil, err
	}
	if n > MaxTokenFileBytes {
		return nil, fmt.Errorf("longer than %d bytes", MaxTokenFileBytes)
	}
	return b.Bytes(), nil
}

// reload reads the file and, if it parses, makes its tokens t's.
func (w *watcher) reload(why string) {
	b, err := w.read()
	if err != nil {
		w.log.Warn("token file not reloaded; keeping the tokens loaded before", "err", err)
		return
	}
	sum := sha256.Sum256(b)
	if sum == w.last {
		return
	}
	nt, err := ParseFile(bytes.NewReader(b), w.file, w.t.Roles())
	if err != nil {
		w.log.Warn("token file not reloaded; keeping the tokens loaded before", "err", err)
		return
	}
	if nt.Len() == 0 && !w.t.HasVerifier() {
		w.log.Warn("token file not reloaded: it holds no token, which would leave the server usable by nobody; keeping the tokens loaded before")
		return
	}
	w.last = sum
	w.t.Replace(nt)
	w.log.Info("tokens reloaded", "why", why, "tokens", nt.Len())
}
