package main

import (
	"bytes"
	"context"
	"os"
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
