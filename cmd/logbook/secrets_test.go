package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSecretsStayOutOfOutput: a token or password given in the
// environment is not printed by a usage error (flag defaults from the
// environment are secrets), and a store URL is redacted wherever it
// carries a password — in its user info or as a query parameter.
func TestSecretsStayOutOfOutput(t *testing.T) {
	const secret = "s3cret-token-never-printed"
	getenv := func(k string) string {
		switch k {
		case "LOGBOOK_REPLICA_TOKEN", "LOGBOOK_TOKENS":
			return secret
		case "LOGBOOK_STORE":
			return "postgres://u:" + secret + "@h/db"
		case "LOGBOOK_BUS":
			return "kafka://h:1/t?password=" + secret
		}
		return ""
	}
	for _, args := range [][]string{
		{"flights", "serve", "--bogus"},
		{"flights", "serve", "--help"},
		{"serve", "--bogus"},
		{"bench", "append", "--bogus"},
		{"loadtest", "write", "--bogus"},
	} {
		var out, errb bytes.Buffer
		run(context.Background(), &env{stdout: &out, stderr: &errb, getenv: getenv}, args)
		if strings.Contains(out.String()+errb.String(), secret) {
			t.Errorf("%v printed the secret:\n%s%s", args, out.String(), errb.String())
		}
	}
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db":                          "postgres://u:***@h:5432/db",
		"postgres://u@h/db?sslmode=disable&password=pw":      "postgres://u@h/db?sslmode=disable&password=***",
		"postgres://u@h/db?password=pw&sslmode=disable":      "postgres://u@h/db?password=***&sslmode=disable",
		"postgres://u:pw@h/db?password=pw2":                  "postgres://u:***@h/db?password=***",
		"postgres://u@h/db?sslpassword=pw":                   "postgres://u@h/db?sslpassword=***",
		"postgres://u@h/db?sslmode=disable":                  "postgres://u@h/db?sslmode=disable",
		"host=h user=u password=pw dbname=db":                "host=h user=u password=*** dbname=db",
		"postgres://u@h/db?application_name=password%3Dfine": "postgres://u@h/db?application_name=password%3Dfine",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(redactURL(in), "pw") {
			t.Errorf("redactURL(%q) still shows the password", in)
		}
	}
}

// TestServingCommandsRedactURLsInErrors: a serving command whose store,
// users' database, bus or delivery URL carries a password (in its user
// info or its query) and cannot be opened, or is not one it takes, says
// so without the password.
func TestServingCommandsRedactURLsInErrors(t *testing.T) {
	const secret = "pw-in-a-url-9c1e"
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,sender-token:sender")
	pg := "postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"
	for _, args := range [][]string{
		{"flights", "serve", "--store", pg},
		{"flights", "serve", "--store", "postgres://u:" + secret + "@127.0.0.1:notaport/db"},
		{"flights", "serve", "--store", "mysql://u:" + secret + "@h/db"},
		{"flights", "serve", "--data", t.TempDir(), "--bus", "kafka://u:" + secret + "@127.0.0.1:1/t?password=" + secret},
		{"tickets", "serve", "--store", pg},
		{"tickets", "serve", "--store", "http://h/db?token=" + secret},
		{"kv", "serve", "--store", pg},
		{"kv", "serve", "--store", "redis://:" + secret + "@127.0.0.1:1"},
		{"kv", "serve", "--store", "etcd://u:" + secret + "@127.0.0.1:1"},
		{"kv", "serve", "--store", "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=2&password=" + secret},
		{"notify", "serve", "--data", t.TempDir(), "--state", t.TempDir(), "--users-db", pg,
			"--push-url", "http://127.0.0.1:1/deliver?token=" + secret, "--email-url", "http://u:" + secret + "@127.0.0.1:1/deliver"},
		{"notify", "serve", "--data", t.TempDir(), "--state", t.TempDir(), "--users-db", pg, "--metrics-sink", "mysql://u:" + secret + "@h/db",
			"--push-url", "http://127.0.0.1:1/deliver", "--email-url", "http://127.0.0.1:1/deliver"},
	} {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		run(ctx, &env{stdout: &out, stderr: &errb, getenv: os.Getenv}, append(args, "--addr", "127.0.0.1:0"))
		cancel()
		if strings.Contains(out.String()+errb.String(), secret) {
			t.Errorf("%v printed the password:\n%s%s", args, out.String(), errb.String())
		}
	}
	for in, want := range map[string]string{
		"http://h/deliver?token=pw&x=1":          "http://h/deliver?token=***&x=1",
		"http://h/deliver?x=1&access_token=pw":   "http://h/deliver?x=1&access_token=***",
		"http://h/deliver?api_key=pw":            "http://h/deliver?api_key=***",
		"http://h/deliver?secret=pw":             "http://h/deliver?secret=***",
		"http://h/deliver?sig=pw":                "http://h/deliver?sig=***",
		"redis://:pw@h:6379":                     "redis://:***@h:6379",
		"http://h/deliver?tokenizer=on":          "http://h/deliver?tokenizer=on",
		"kafka://u:pw@h:9092/t?sasl_password=pw": "kafka://u:***@h:9092/t?sasl_password=***",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSecretFlagsFromFiles: a secret-bearing flag may be read from a file
// (--NAME-file), which keeps it out of ps; a command that then fails says
// so without the secret; giving both forms is bad usage. A JWKS URL's
// query is not shown either.
func TestSecretFlagsFromFiles(t *testing.T) {
	const secret = "pw-from-a-file-5d2b"
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,sender-token:sender")
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pg := write("store", "postgres://u:"+secret+"@127.0.0.1:1/db?sslmode=disable&connect_timeout=2")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"flights", "serve", "--store-file", pg}, 1, "open store postgres://u:***@127.0.0.1:1"},
		{[]string{"tickets", "serve", "--store-file", pg}, 1, "postgres://u:***@"},
		{[]string{"kv", "serve", "--store-file", pg}, 1, "postgres://u:***@"},
		{[]string{"flights", "serve", "--store-file", pg, "--store", "postgres://h/db"}, 2, "not both"},
		{[]string{"flights", "serve", "--store-file", filepath.Join(dir, "absent")}, 2, "--store-file"},
		{[]string{"kv", "serve", "--data", t.TempDir(), "--jwks-url", "http://127.0.0.1:1/jwks?api_key=" + secret, "--issuer", "i", "--audience", "a"}, 1, "fetch key set from http://127.0.0.1:1/jwks:"},
		{[]string{"kv", "serve", "--data", t.TempDir(), "--jwks-url", "http://idp.example/jwks?api_key=" + secret, "--issuer", "i", "--audience", "a"}, 1, "want an https:// URL"},
	} {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code := run(ctx, &env{stdout: &out, stderr: &errb, getenv: os.Getenv}, append(c.args, "--addr", "127.0.0.1:0"))
		cancel()
		all := out.String() + errb.String()
		if code != c.code || !strings.Contains(all, c.says) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", c.args, code, c.code, c.says, all)
		}
		if strings.Contains(all, secret) {
			t.Errorf("%v printed the secret:\n%s", c.args, all)
		}
	}
}

// TestScriptsKeepSecretsOutOfArgv: the project's scripts give no
// secret-bearing flag a value on a command line, which every user of the
// machine sees through ps: they use the flag's environment variable or
// its --NAME-file.
func TestScriptsKeepSecretsOutOfArgv(t *testing.T) {
	scripts, err := filepath.Glob("../../scripts/*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatal(scripts, err)
	}
	flag := regexp.MustCompile(`--(store|bus|users-db|token|replica-token|metrics-sink|sasl-password)(=|\s)`)
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if m := flag.FindString(line); m != "" {
				t.Errorf("%s:%d passes %s on the command line: %s", s, i+1, strings.TrimSpace(m), strings.TrimSpace(line))
			}
		}
	}
}
