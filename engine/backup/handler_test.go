package backup

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// One backup at a time: a request while one runs is answered 409, and
// the server names the directory, under its root.
func TestServiceOneAtATime(t *testing.T) {
	root := t.TempDir()
	store, err := pebblestore.Open(filepath.Join(root, "data"), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &Service{Store: store, Root: filepath.Join(root, "backups")}
	post := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, Path, nil))
		return w
	}
	s.running.Lock() // a backup running
	if w := post(); w.Code != http.StatusConflict || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("request during a backup: %d %s", w.Code, w.Body)
	}
	s.running.Unlock()
	for range 2 {
		if w := post(); w.Code != http.StatusCreated {
			t.Fatalf("backup: %d %s", w.Code, w.Body)
		}
	}
	entries, err := os.ReadDir(s.Root)
	if err != nil || len(entries) != 2 {
		t.Fatalf("backups under the root: %v, %v", entries, err)
	}
	for _, e := range entries {
		if _, err := ReadManifest(filepath.Join(s.Root, e.Name())); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
	if _, err := Take(store, map[string]View{"../x": nil}, filepath.Join(root, "b")); err == nil {
		t.Error("a view named ../x was accepted")
	}
}
