package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook/logbook/internal/devca"
)

// Every serving command refuses bad TLS flags as bad usage (exit 2),
// saying what is wrong, before it opens a store or listens.
func TestServingCommandsRefuseBadTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, err := devca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := ca.Issue(devca.Leaf{Name: "a", Hosts: []string{"127.0.0.1"}})
	p2, _ := ca.Issue(devca.Leaf{Name: "b", Hosts: []string{"127.0.0.1"}})
	cert, _, err := p1.Write(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := p2.Write(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"flights", "serve", "--data", filepath.Join(dir, "f")},
		{"tickets", "serve", "--data", filepath.Join(dir, "t")},
		{"kv", "serve", "--data", filepath.Join(dir, "kv")},
		{"notify", "sink"},
		{"notify", "serve", "--data", filepath.Join(dir, "n"), "--users-db", "postgres://127.0.0.1:1/users",
			"--push-url", "http://127.0.0.1:1/deliver", "--email-url", "http://127.0.0.1:1/deliver"},
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", cert}, "--tls-cert and --tls-key go together"},
		{"unreadable", []string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", otherKey}, "no such file"},
		{"key of another certificate", []string{"--tls-cert", cert, "--tls-key", otherKey}, "does not match"},
		{"client CA not a certificate", []string{"--tls-cert", cert, "--tls-key", filepath.Join(dir, "a.key"), "--tls-client-ca", otherKey}, "no PEM certificate"},
	} {
		for _, cmd := range commands {
			t.Run(c.name+"/"+strings.Join(cmd[:2], " "), func(t *testing.T) {
				t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
				code, _, stderr := runCLI(t, append(append([]string{}, cmd...), c.args...)...)
				if code != 2 || !strings.Contains(stderr, c.want) {
					t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, c.want)
				}
			})
		}
	}
	code, _, stderr := runCLI(t, "flights", "serve", "--data", filepath.Join(dir, "f"), "--follow-ca", cert)
	if code != 2 || !strings.Contains(stderr, "--replica-of") {
		t.Fatalf("--follow-ca without --replica-of: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "flights", "serve", "--replica-of", "https://127.0.0.1:1", "--replica-token", "tok-12345678", "--follow-ca", otherKey)
	if code != 2 || !strings.Contains(stderr, "no PEM certificate") {
		t.Fatalf("--follow-ca of a key: exit %d, %q", code, stderr)
	}
}
