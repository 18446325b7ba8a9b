package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
