package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// engine/auth knows no service: the services declare their roles, and
// the binary hands them to the token loader. No file of the package (but
// this one, which must spell what it looks for) names a service's role.
func TestNamesNoServiceRole(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, f := range files {
		if f == "neutral_test.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		low := strings.ToLower(string(src))
		// Words that contain a role's letters but name no service.
		low = strings.NewReplacer("fsnotify", "", "inotify", "", "signal.notify", "").Replace(low)
		for _, name := range []string{"planner", "booker", "sender", "schema-admin", "schemaadmin", "flight", "ticket", "notif"} {
			if strings.Contains(low, name) {
				t.Errorf("%s names %q: a service's role belongs to the service", f, name)
			}
		}
	}
}
