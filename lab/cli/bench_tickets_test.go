package cli

import (
	"strings"
	"testing"
)

// Misused flags of bench tickets and of loadtest tickets' two models are
// usage errors (exit 2) that name the flag.
func TestTicketsTablesUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "tickets"}, "table"},
		{[]string{"bench", "tickets", "--table", "12"}, "--table 12"},
		{[]string{"bench", "tickets", "--table", "11", "--model", "lifo"}, "--model"},
		{[]string{"bench", "tickets", "--table", "11", "--runs", "0"}, "--runs"},
		{[]string{"bench", "tickets", "--table", "11", "--minute", "10ms"}, "--minute"},
		{[]string{"bench", "tickets", "--table", "11", "--hot-users", "0"}, "--hot-users"},
		{[]string{"bench", "tickets", "--table", "11", "--replica-choice", "first"}, "Table 13's"},
		{[]string{"loadtest", "tickets", "--url", "http://127.0.0.1:1", "--token", "t", "--users", "5"}, "--model closed"},
		{[]string{"loadtest", "tickets", "--url", "http://127.0.0.1:1", "--token", "t", "--model", "closed", "--cold-rate", "5"}, "--cold-rate is the open model's"},
		{[]string{"loadtest", "tickets", "--url", "http://127.0.0.1:1", "--token", "t", "--model", "closed", "--think", "0s"}, "--think"},
		{[]string{"loadtest", "tickets", "--url", "http://127.0.0.1:1", "--token", "t", "--model", "half"}, "--model"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
}
