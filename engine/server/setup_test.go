package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/auth"
)

// LoadTokens reads a file or LOGBOOK_TOKENS; none at all is ErrNoTokens,
// naming the roles the server takes.
func TestLoadTokens(t *testing.T) {
	const booker auth.Role = "booker" // a role a service declares
	t.Setenv("LOGBOOK_TOKENS", "")
	_, err := LoadTokens("", []auth.Role{booker}, auth.Viewer, booker)
	if !errors.Is(err, ErrNoTokens) || !strings.Contains(err.Error(), "roles: viewer, booker") {
		t.Fatalf("no tokens: %v", err)
	}
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
	tokens, err := LoadTokens("", nil, auth.Viewer)
	if err != nil || tokens.Len() != 1 {
		t.Fatalf("from the environment: %v", err)
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# comment\nbooker-token booker\nviewer-token viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tokens, err = LoadTokens(file, []auth.Role{booker}, auth.Viewer, booker); err != nil || tokens.Len() != 2 {
		t.Fatalf("from a file: %v", err)
	}
	if role, ok := tokens.Lookup("booker-token"); !ok || role != booker {
		t.Fatalf("booker-token: %q %v", role, ok)
	}
	if _, err := LoadTokens(file, nil, auth.Viewer); err == nil || errors.Is(err, ErrNoTokens) {
		t.Fatalf("a role the binary does not know: %v, want it refused", err)
	}
	if _, err := LoadTokens(filepath.Join(t.TempDir(), "none"), nil); err == nil || errors.Is(err, ErrNoTokens) {
		t.Fatalf("a missing file: %v, want the file's error", err)
	}
}

func TestParseBus(t *testing.T) {
	if b, err := ParseBus(""); b != nil || err != nil {
		t.Fatalf(`ParseBus(""): %v %v, want no bus`, b, err)
	}
	b, err := ParseBus("kafka://h1:9092,h2:9092/flights")
	if err != nil || b.Topic != "flights" || len(b.Config.Brokers) != 2 || b.Avro {
		t.Fatalf("ParseBus: %+v %v", b, err)
	}
	if _, err := ParseBus("http://h:1/t"); err == nil {
		t.Fatal("ParseBus took an http:// URL")
	}
}
