package main

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/internal/cliutil"
)

// commands lists the binary's command tree, the root first, each command
// with its full path.
func commands(t *testing.T) []*cobra.Command {
	t.Helper()
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if len(all) < 30 {
		t.Fatalf("the tree has %d commands", len(all))
	}
	return all
}

// TestCommandTree holds every command to the conventions of cobra's own
// help: a Short line of at most 80 characters, capitalised, without a
// final period; an Example on every command people run (not the groups,
// which only list theirs); and no default --addr shared by two commands,
// each as docs/ports.md lists it.
func TestCommandTree(t *testing.T) {
	ports := map[string]string{} // default --addr → command
	listens := map[string]string{}
	for _, c := range commands(t) {
		path := c.CommandPath()
		t.Run(path, func(t *testing.T) {
			short := c.Short
			if n := utf8.RuneCountInString(short); n == 0 || n > 80 {
				t.Errorf("Short has %d characters, want 1–80: %q", n, short)
			}
			if r, _ := utf8.DecodeRuneInString(short); !unicode.IsUpper(r) {
				t.Errorf("Short does not start with a capital: %q", short)
			}
			if strings.HasSuffix(short, ".") {
				t.Errorf("Short ends with a period: %q", short)
			}
			if strings.Contains(strings.ToLower(c.Short+c.Long+c.Example), "the seed") {
				t.Errorf("help says \"the seed\": name the published work instead")
			}
			// help and completion are cobra's own, explained in their Long.
			cobras := c.Name() == "help" || c.HasParent() && c.Parent().Name() == "completion"
			runs := c.Runnable() && !c.Hidden && c.Deprecated == "" && !c.HasSubCommands() && !cobras
			if runs && c.Example == "" {
				t.Errorf("no Example")
			}
			if c.Example != "" && !strings.Contains(c.Example, "logbook ") {
				t.Errorf("Example runs no logbook command: %q", c.Example)
			}
		})
		f := c.Flags().Lookup("addr")
		if f == nil || c.Deprecated != "" {
			continue
		}
		if other, ok := ports[f.DefValue]; ok {
			t.Errorf("%s and %s both listen on %s by default", other, path, f.DefValue)
		}
		ports[f.DefValue] = path
		listens[path] = f.DefValue
	}
	for _, want := range []string{"logbook flights serve", "logbook tickets serve", "logbook notify serve", "logbook kv serve", "logbook notify sink", "logbook cluster"} {
		if listens[want] == "" {
			t.Errorf("%s has no default --addr", want)
		}
	}
	// docs/ports.md's table is the same list.
	doc, err := os.ReadFile("../../docs/ports.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `(logbook [a-z ]+)` \\| ([0-9.:]+) \\|").FindAllStringSubmatch(string(doc), -1)
	documented := map[string]string{}
	for _, r := range rows {
		documented[r[1]] = r[2]
	}
	for path, addr := range listens {
		if documented[path] != addr {
			t.Errorf("docs/ports.md gives %s %q, the command %q", path, documented[path], addr)
		}
	}
	if len(documented) != len(listens) {
		t.Errorf("docs/ports.md lists %d commands, %d listen: %v", len(documented), len(listens), documented)
	}
}

// TestServeAlias: `logbook serve` is still the flights service's serve,
// with the same flags, and says it is deprecated when used.
func TestServeAlias(t *testing.T) {
	var alias, serve *cobra.Command
	for _, c := range commands(t) {
		switch c.CommandPath() {
		case "logbook serve":
			alias = c
		case "logbook flights serve":
			serve = c
		}
	}
	if alias == nil || serve == nil {
		t.Fatal("no logbook serve or no logbook flights serve")
	}
	if !strings.Contains(alias.Deprecated, "logbook flights serve") {
		t.Errorf("serve's Deprecated %q does not name logbook flights serve", alias.Deprecated)
	}
	var names, want []string
	alias.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name+"="+f.DefValue) })
	serve.Flags().VisitAll(func(f *pflag.Flag) { want = append(want, f.Name+"="+f.DefValue) })
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("serve's flags %v, flights serve's %v", names, want)
	}
	// Used, it runs flights serve's checks and says it is deprecated.
	code, out, stderr := runCLI(t, "serve", "--max-conns", "0")
	if code != 2 || !strings.Contains(stderr, "--max-conns must be positive") {
		t.Errorf("serve --max-conns 0: exit %d, stderr %q; want 2 and flights serve's usage error", code, stderr)
	}
	if !strings.Contains(out+stderr, `Command "serve" is deprecated, use "logbook flights serve" instead`) {
		t.Errorf("serve does not say it is deprecated: stdout %q, stderr %q", out, stderr)
	}
	// It is left out of the help's list of commands.
	_, help, _ := runCLI(t, "--help")
	if regexp.MustCompile(`(?m)^  serve\s`).MatchString(help) {
		t.Errorf("help lists the deprecated serve:\n%s", help)
	}
}

// secretFlagNames says which flags carry a secret, by name: the URLs of
// the stores, buses and databases a command connects to (a password may
// be in them) — store, bus, users-db, metrics-sink and bench kv's
// postgres — and any token or password: token, a name ending in -token,
// a name holding "password" or "secret". Addresses without credentials
// (--addr, --server, --url, bench kv's --redis, --etcd, --kafka and
// --cassandra host:port lists), --tokens (the path of a token file) and
// the --…-file forms themselves are not secrets.
func secretFlagName(name string) bool {
	switch name {
	case "store", "bus", "users-db", "metrics-sink", "postgres", "token":
		return true
	}
	if strings.HasSuffix(name, "-file") {
		return false
	}
	return strings.HasSuffix(name, "-token") || strings.Contains(name, "password") || strings.Contains(name, "secret")
}

// TestSecretFlagsHaveFileAndEnvForms walks the command tree: every flag
// that carries a secret (secretFlagName) can be given as --NAME-file,
// which the root reads into it, and as LOGBOOK_NAME, so that a secret
// need never be in argv, where every user of the machine sees it.
func TestSecretFlagsHaveFileAndEnvForms(t *testing.T) {
	found := 0
	for _, c := range commands(t) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !secretFlagName(f.Name) {
				return
			}
			found++
			file := c.Flags().Lookup(f.Name + "-file")
			if file == nil || len(file.Annotations[cliutil.FileAnnotation]) != 1 || file.Annotations[cliutil.FileAnnotation][0] != f.Name {
				t.Errorf("%s --%s carries a secret but has no --%s-file form (cliutil.SecretFlag)", c.CommandPath(), f.Name, f.Name)
			}
			env := "LOGBOOK_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if got := f.Annotations[cliutil.EnvAnnotation]; len(got) != 1 || got[0] != env {
				t.Errorf("%s --%s carries a secret but is not read from %s: %v", c.CommandPath(), f.Name, env, got)
			}
		})
	}
	// The rule finds the secrets it is meant to: each serving command's
	// --store, the loadtests' --token, …
	if found < 40 {
		t.Errorf("the rule names %d secret flags in the tree; it matches less than it should", found)
	}
}
