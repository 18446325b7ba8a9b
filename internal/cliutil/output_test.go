package cliutil

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// outputOf runs a command that prints a result with -o, given args, and
// returns what it printed and its error.
func outputOf(t *testing.T, formats []Format, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := &cobra.Command{Use: "x", SilenceErrors: true, SilenceUsage: true}
	o := OutputFlag(cmd, formats...)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := ValidateFlags(cmd); err != nil {
			return err
		}
		res := struct {
			Events int `json:"events"`
		}{42}
		return o.Print(&out, res, Pairs([][2]string{{"events", "42"}, {"note", "a, b"}}))
	}
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	err := cmd.Execute()
	return out.String(), err
}

func TestOutput(t *testing.T) {
	for _, c := range []struct {
		formats []Format
		args    []string
		want    string
		err     string
	}{
		{nil, nil, "events  42\nnote    a, b\n", ""},
		{nil, []string{"-o", "table"}, "events  42\nnote    a, b\n", ""},
		{nil, []string{"-o", "json"}, "{\"events\":42}\n", ""},
		{nil, []string{"--output=json"}, "{\"events\":42}\n", ""},
		{nil, []string{"--json"}, "{\"events\":42}\n", ""},
		{nil, []string{"-o", "csv"}, "name,value\nevents,42\nnote,\"a, b\"\n", ""},
		{nil, []string{"-o", "xml"}, "", `"xml": want table, json, csv`},
		{nil, []string{"-o", "csv", "--json"}, "", "none of the others can be"},
		{[]Format{Table, JSON}, []string{"-o", "csv"}, "", `"csv": want table, json`},
		{[]Format{Table, JSON}, []string{"--json"}, "{\"events\":42}\n", ""},
	} {
		got, err := outputOf(t, c.formats, c.args...)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %q, %v; want %q", c.args, got, err, c.want)
		}
	}
}

// A table with a header prints it; csv always does.
func TestOutputRows(t *testing.T) {
	var b bytes.Buffer
	o := &Output{format: Table}
	rows := Rows{Header: []string{"a", "bb"}, Rows: [][]string{{"1", "2"}}}
	if err := o.Print(&b, nil, rows); err != nil || b.String() != "a  bb\n1  2\n" {
		t.Errorf("table: %q, %v", b.String(), err)
	}
	b.Reset()
	o.format = CSV
	if err := o.Print(&b, nil, rows); err != nil || b.String() != "a,bb\n1,2\n" {
		t.Errorf("csv: %q, %v", b.String(), err)
	}
}

// Required and exclusive flags are bad usage (exit code 2), not failures.
func TestValidateFlagsIsUsage(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().String("url", "", "")
	_ = cmd.MarkFlagRequired("url")
	err := ValidateFlags(cmd)
	if !IsUsage(err) || !strings.Contains(err.Error(), `"url"`) {
		t.Fatalf("missing required flag: %v (usage %v)", err, IsUsage(err))
	}
	_ = cmd.Flags().Set("url", "http://x")
	if err := ValidateFlags(cmd); err != nil {
		t.Fatalf("given: %v", err)
	}
}
