package cliutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestSecretFlagFile: --NAME-file sets --NAME from the file's contents
// less a final newline; both given is bad usage; an unreadable, empty or
// oversized file is bad usage naming the file, never the value.
func TestSecretFlagFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parse := func(args ...string) (string, error) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		v := fs.String("store", "", "a URL")
		SecretFlag(fs, "store")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		err := ApplyFileFlags(fs)
		if err == nil && !fs.Lookup("store").Changed && *v != "" {
			t.Fatal("set but not marked given")
		}
		return *v, err
	}
	if v, err := parse("--store-file", write("a", "postgres://u:pw@h/db\n")); err != nil || v != "postgres://u:pw@h/db" {
		t.Fatalf("%q %v", v, err)
	}
	if v, err := parse("--store-file", write("b", "with trailing blank \r\n")); err != nil || v != "with trailing blank " {
		t.Fatalf("%q %v", v, err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--store", "x", "--store-file", write("c", "y")}, "not both"},
		{[]string{"--store-file", write("d", "\n")}, "is empty"},
		{[]string{"--store-file", filepath.Join(dir, "absent")}, "no such file"},
		{[]string{"--store-file", write("e", strings.Repeat("s", MaxSecretFileBytes+1))}, "longer than"},
	} {
		_, err := parse(c.args...)
		var u UsageError
		if err == nil || !strings.Contains(err.Error(), c.says) || !errors.As(err, &u) {
			t.Errorf("%v: %v, want a usage error saying %q", c.args, err, c.says)
		}
	}
}
