// Package backup takes and restores backups of the embedded event store
// (engine/eventstore/pebblestore) and of the durable views fed from it.
//
// A backup is a directory:
//
//	backup.json       the manifest, written last: format, the log position
//	                  the backup holds, when it was taken, the views
//	store/            a Pebble checkpoint of the event store
//	views/<name>/     a Pebble checkpoint of each durable view
//
// Take copies the views first, then the store, all while the process
// serves and appends. A view only ever applies events the store has made
// durable, so each view's checkpoint in the backup is at or below the
// backup's position: restored, a view never holds the effect of an event
// the restored log lacks, and its runner catches it up from its
// checkpoint to the log's head, as after any restart. The manifest is
// written (and synced) last, so a directory without one is not a backup.
//
// Restore copies a backup into an empty directory and checks it
// (pebblestore.Verify) before it says it succeeded.
package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/verify"
)

// Format names the layout of a backup directory.
const Format = "logbook-backup-1"

// ManifestFile is the manifest's name in a backup directory.
const ManifestFile = "backup.json"

// Manifest describes a backup.
type Manifest struct {
	Format string `json:"format"`
	// Position is the position of the last event of the log the backup
	// holds: every append acknowledged before the backup began is at or
	// below it, and no append is in it in part.
	Position uint64    `json:"position"`
	Taken    time.Time `json:"taken"`
	// Views are the durable views copied with the store, by name.
	Views []ViewCheckpoint `json:"views"`
}

// ViewCheckpoint is a view in a backup and the checkpoint it holds, at or
// below the backup's position.
type ViewCheckpoint struct {
	Name       string `json:"name"`
	Checkpoint uint64 `json:"checkpoint"`
}

// A View is a durable view that can copy itself, as
// projection.PebbleView.Backup does, returning the checkpoint the copy
// holds.
type View interface {
	Backup(dir string) (uint64, error)
}

var viewName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Take backs up store and views into out, which must not exist or be an
// empty directory. The views' names must be distinct, lower-case letters,
// digits, - and _.
func Take(store *pebblestore.Store, views map[string]View, out string) (*Manifest, error) {
	for name := range views {
		if !viewName.MatchString(name) {
			return nil, fmt.Errorf("backup: view name %q: want lower-case letters, digits, - and _", name)
		}
	}
	if err := prepareEmpty(out); err != nil {
		return nil, err
	}
	m, err := take(store, views, out)
	if err != nil {
		_ = os.RemoveAll(filepath.Join(out, "store"))
		_ = os.RemoveAll(filepath.Join(out, "views"))
		return nil, err
	}
	return m, nil
}

func take(store *pebblestore.Store, views map[string]View, out string) (*Manifest, error) {
	m := &Manifest{Format: Format, Taken: time.Now().UTC(), Views: []ViewCheckpoint{}}
	names := make([]string, 0, len(views))
	for name := range views {
		names = append(names, name)
	}
	sort.Strings(names)
	// Views first: their checkpoints then lie at or below the store's.
	for _, name := range names {
		cp, err := views[name].Backup(filepath.Join(out, "views", name))
		if err != nil {
			return nil, fmt.Errorf("backup: view %s: %w", name, err)
		}
		m.Views = append(m.Views, ViewCheckpoint{Name: name, Checkpoint: cp})
	}
	pos, err := store.Checkpoint(filepath.Join(out, "store"))
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	m.Position = pos
	for _, v := range m.Views {
		if v.Checkpoint > pos {
			return nil, fmt.Errorf("backup: view %s is at position %d, beyond the log's %d", v.Name, v.Checkpoint, pos)
		}
	}
	if err := writeManifest(out, m); err != nil {
		return nil, err
	}
	return m, nil
}

// prepareEmpty makes dir if it does not exist, and refuses it if it holds
// anything.
func prepareEmpty(dir string) error {
	if dir == "" {
		return errors.New("backup: no directory given")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		return syncDir(filepath.Dir(dir))
	case err != nil:
		return fmt.Errorf("backup: %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%w: %s holds %d entries (%s, …); give an empty or new directory", ErrNotEmpty, dir, len(entries), entries[0].Name())
	}
	// An existing, empty directory is made private too: the checkpoint's
	// files inside it are written world-readable.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// ErrNotEmpty is the error for a target directory that holds something.
var ErrNotEmpty = errors.New("backup: directory not empty")

// ErrNotBackup is the error for a directory that is not a backup.
var ErrNotBackup = errors.New("backup: not a logbook backup")

func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ManifestFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backup: write manifest: %w", err)
	}
	return nil
}

// ReadManifest reads the manifest of the backup in dir.
func ReadManifest(dir string) (*Manifest, error) {
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("backup: %s: no such directory", dir)
		}
		return nil, fmt.Errorf("backup: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s (an unfinished backup, or not one)", ErrNotBackup, dir, ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotBackup, ManifestFile, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: format %q, this build reads %q", ErrNotBackup, m.Format, Format)
	}
	for _, v := range m.Views {
		if !viewName.MatchString(v.Name) {
			return nil, fmt.Errorf("%w: view name %q", ErrNotBackup, v.Name)
		}
	}
	return &m, nil
}

// Restored is what Restore did.
type Restored struct {
	Manifest *Manifest
	// Report is the check of the restored store.
	Report *verify.Report
}

// Restore copies the backup in from into data (the store) and, if
// viewsDir is not empty, its views into viewsDir/<name>. data and
// viewsDir must not exist or be empty. The backup's store is checked
// before anything is copied, the restored one after: Restore fails unless
// both pass and hold the manifest's position. On failure what it copied
// is removed.
func Restore(from, data, viewsDir string) (*Restored, error) {
	m, err := ReadManifest(from)
	if err != nil {
		return nil, err
	}
	if data == "" {
		return nil, errors.New("backup: restore: no data directory given")
	}
	if err := checkStore(filepath.Join(from, "store"), m.Position, "the backup"); err != nil {
		return nil, err
	}
	if err := refuseNonEmpty(data); err != nil {
		return nil, err
	}
	if viewsDir != "" && len(m.Views) > 0 {
		if err := refuseNonEmpty(viewsDir); err != nil {
			return nil, err
		}
	}
	var made []string
	undo := func() {
		for _, d := range made {
			_ = os.RemoveAll(d)
		}
	}
	if err := copyTree(filepath.Join(from, "store"), data, &made); err != nil {
		undo()
		return nil, fmt.Errorf("backup: restore: %w", err)
	}
	if viewsDir != "" {
		for _, v := range m.Views {
			if err := copyTree(filepath.Join(from, "views", v.Name), filepath.Join(viewsDir, v.Name), &made); err != nil {
				undo()
				return nil, fmt.Errorf("backup: restore view %s: %w", v.Name, err)
			}
		}
	}
	rep, err := pebblestore.Verify(data, pebblestore.VerifyOptions{})
	if err == nil {
		err = rep.Err()
	}
	if err == nil && rep.Head != m.Position {
		err = fmt.Errorf("the restored log ends at %d, the backup says %d", rep.Head, m.Position)
	}
	if err != nil {
		undo()
		return nil, fmt.Errorf("backup: restore: check of the restored store: %w", err)
	}
	return &Restored{Manifest: m, Report: rep}, nil
}

// checkStore verifies the store in dir and that its head is pos.
func checkStore(dir string, pos uint64, what string) error {
	rep, err := pebblestore.Verify(dir, pebblestore.VerifyOptions{})
	if err != nil {
		return fmt.Errorf("backup: %s's store: %w", what, err)
	}
	if err := rep.Err(); err != nil {
		return fmt.Errorf("backup: %s's store: %w", what, err)
	}
	if rep.Head != pos {
		return fmt.Errorf("backup: %s's store ends at position %d, its manifest says %d", what, rep.Head, pos)
	}
	return nil
}

// refuseNonEmpty is nil for a directory that does not exist or is empty.
func refuseNonEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("backup: %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%w: %s holds %d entries (%s, …); restore only into an empty or new directory", ErrNotEmpty, dir, len(entries), entries[0].Name())
	}
	return nil
}

// copyTree copies the regular files of src (a Pebble directory: flat)
// into dst, syncing each file and the directory. Directories it creates
// are added to made.
func copyTree(src, dst string, made *[]string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return err
		}
		*made = append(*made, dst)
	} else {
		// An empty directory given by the caller: remove what we copy, not it.
		for _, e := range entries {
			*made = append(*made, filepath.Join(dst, e.Name()))
		}
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), made); err != nil {
				return err
			}
			continue
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", filepath.Join(src, e.Name()))
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return errors.Join(syncDir(dst), syncDir(filepath.Dir(dst)))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Sync(), out.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
