package cliutil

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// Format is how a command prints its result: -o table|json|csv.
type Format string

// The formats of -o.
const (
	Table Format = "table" // aligned columns for people (the default)
	JSON  Format = "json"  // one JSON object
	CSV   Format = "csv"   // comma-separated values with a header line
)

// Output is a command's output flag: -o/--output FORMAT, with --json an
// alias of -o json.
type Output struct {
	format  Format
	formats []Format
}

// OutputFlag registers -o (one of formats; all three when none is
// given, table first and the default) and --json on cmd, the two mutually
// exclusive, with shell completion of the formats.
func OutputFlag(cmd *cobra.Command, formats ...Format) *Output {
	if len(formats) == 0 {
		formats = []Format{Table, JSON, CSV}
	}
	o := &Output{format: formats[0], formats: formats}
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	fs := cmd.Flags()
	fs.VarP((*formatValue)(o), "output", "o", "output format: "+strings.Join(names, ", "))
	o.Alias(cmd, "json", JSON)
	cmd.MarkFlagsMutuallyExclusive("output", "json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(names, cobra.ShellCompDirectiveNoFileComp))
	return o
}

// Alias registers --name, a flag without a value that means -o f.
func (o *Output) Alias(cmd *cobra.Command, name string, f Format) {
	flag := cmd.Flags().VarPF(aliasValue{o, f}, name, "", "same as -o "+string(f))
	flag.NoOptDefVal = "true"
}

// Format is the format asked for.
func (o *Output) Format() Format { return o.format }

// JSON says whether the output is JSON.
func (o *Output) JSON() bool { return o.format == JSON }

// Quiet says whether the output is for a machine: no progress bar then.
func (o *Output) Quiet() bool { return o.format != Table }

func (o *Output) set(s string) error {
	f := Format(s)
	if !slices.Contains(o.formats, f) {
		names := make([]string, len(o.formats))
		for i, f := range o.formats {
			names[i] = string(f)
		}
		return fmt.Errorf("%q: want %s", s, strings.Join(names, ", "))
	}
	o.format = f
	return nil
}

type formatValue Output

func (v *formatValue) String() string     { return string(v.format) }
func (v *formatValue) Set(s string) error { return (*Output)(v).set(s) }
func (v *formatValue) Type() string       { return "format" }

type aliasValue struct {
	o *Output
	f Format
}

func (v aliasValue) String() string { return "false" }
func (v aliasValue) Type() string   { return "bool" }
func (v aliasValue) Set(s string) error {
	switch s {
	case "true":
		return v.o.set(string(v.f))
	case "false":
		return nil
	}
	return fmt.Errorf("%q: want true or false", s)
}

// Rows is a result as a table: a header and rows of cells.
type Rows struct {
	Header []string
	Rows   [][]string
	// pairs: name/value rows, printed without their header as a table.
	pairs bool
}

// Pairs is a result of named values, one a row: a table of two columns
// for people, CSV with the header name,value.
func Pairs(rows [][2]string) Rows {
	r := Rows{Header: []string{"name", "value"}, pairs: true}
	for _, p := range rows {
		r.Rows = append(r.Rows, []string{p[0], p[1]})
	}
	return r
}

// Print prints the result: v as JSON, or rows as a table or CSV.
func (o *Output) Print(w io.Writer, v any, rows Rows) error {
	switch o.format {
	case JSON:
		return WriteJSON(w, v)
	case CSV:
		cw := csv.NewWriter(w)
		if rows.Header != nil {
			_ = cw.Write(rows.Header)
		}
		_ = cw.WriteAll(rows.Rows)
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if rows.Header != nil && !rows.pairs {
		fmt.Fprintln(tw, strings.Join(rows.Header, "\t"))
	}
	for _, r := range rows.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// WriteJSON writes v as one JSON object.
func WriteJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
