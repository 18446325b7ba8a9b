package ssim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// RotationHeader is the first line of a rotation file.
const RotationHeader = "rotation,airline,flight_number,suffix,day_of_origin,departure_airport"

var rotationColumns = strings.Split(RotationHeader, ",")

// RotationAssignment puts one dated leg, named by its designator, into a
// rotation. The legs of a rotation are in the order of their lines.
type RotationAssignment struct {
	Rotation string // rotation id: any non-empty text without line breaks
	Leg      Designator
	Line     int // line in the rotation file; 0 when not read from one
}

// ReadRotations reads a rotation file (see the package doc). Lines that
// cannot be used are returned as rejections and skipped; the error is for
// I/O failures and a missing or wrong header line, which leave the column
// order unknown and so end reading.
func ReadRotations(r io.Reader) ([]RotationAssignment, []Rejection, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // wrong column counts are rejections, not errors
	cr.ReuseRecord = true
	var (
		out    []RotationAssignment
		rejs   []Rejection
		header = true
	)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			if header {
				return out, rejs, fmt.Errorf("ssim: rotations: line %d: %w", pe.StartLine, err)
			}
			rejs = append(rejs, Rejection{Line: pe.StartLine, Reason: "rotations: " + pe.Err.Error()})
			continue
		}
		if err != nil {
			return out, rejs, fmt.Errorf("ssim: rotations: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if header {
			header = false
			if len(rec) > 0 {
				// Spreadsheet exports start with a byte order mark.
				rec[0] = strings.TrimPrefix(rec[0], "\uFEFF")
			}
			if !isRotationHeader(rec) {
				return out, rejs, fmt.Errorf("ssim: rotations: line %d: header %q, want %q", line, strings.Join(rec, ","), RotationHeader)
			}
			continue
		}
		a, reason := parseAssignment(rec)
		if reason != "" {
			rejs = append(rejs, Rejection{Line: line, Record: excerpt(strings.Join(rec, ",")), Reason: "rotations: " + reason})
			continue
		}
		a.Line = line
		out = append(out, a)
	}
	if header {
		return nil, nil, errors.New("ssim: rotations: empty file: want header line " + strconv.Quote(RotationHeader))
	}
	return out, rejs, nil
}

func excerpt(s string) string {
	if len(s) > excerptLen {
		return s[:excerptLen]
	}
	return s
}

func isRotationHeader(rec []string) bool {
	if len(rec) != len(rotationColumns) {
		return false
	}
	for i, f := range rec {
		if !strings.EqualFold(strings.TrimSpace(f), rotationColumns[i]) {
			return false
		}
	}
	return true
}

// MaxRotationID bounds a rotation id in a rotation file, as the API does.
const MaxRotationID = 128

func parseAssignment(rec []string) (RotationAssignment, string) {
	var a RotationAssignment
	if len(rec) != len(rotationColumns) {
		return a, fmt.Sprintf("%d fields, want %d (%s)", len(rec), len(rotationColumns), RotationHeader)
	}
	for i := range rec {
		rec[i] = strings.TrimSpace(rec[i])
	}
	a.Rotation = rec[0]
	d := &a.Leg
	d.Airline, d.Suffix, d.Origin = rec[1], rec[3], rec[5]
	switch {
	case a.Rotation == "":
		return a, "rotation missing"
	case len(a.Rotation) > MaxRotationID || !utf8.ValidString(a.Rotation) || strings.ContainsFunc(a.Rotation, unicode.IsControl):
		return a, fmt.Sprintf("rotation id %.40q: at most %d bytes of UTF-8 without control characters", a.Rotation, MaxRotationID)
	case rec[1] == "":
		return a, "airline missing"
	case !validAirline(rec[1]):
		return a, fmt.Sprintf("airline %q invalid: want 2–3 characters A–Z, 0–9", rec[1])
	case rec[2] == "":
		return a, "flight_number missing"
	case rec[5] == "":
		return a, "departure_airport missing"
	case rec[4] == "":
		return a, "day_of_origin missing"
	}
	n, err := strconv.Atoi(rec[2])
	if err != nil || n < 0 || n > 9999 || strings.ContainsAny(rec[2], "+-") {
		return a, fmt.Sprintf("flight_number %q invalid: want 0–9999", rec[2])
	}
	d.Number = n
	if !validSuffix(rec[3]) {
		return a, fmt.Sprintf("suffix %q invalid: want empty or one letter A–Z", rec[3])
	}
	if d.DayOfOrigin, err = ParseDate(rec[4]); err != nil {
		return a, "day_of_origin: " + err.Error()
	}
	if !validStation(rec[5]) {
		return a, fmt.Sprintf("departure_airport %q invalid: want 3 letters A–Z", rec[5])
	}
	return a, ""
}

// WriteRotations writes a rotation file: the header line, then one line
// per assignment in the order given (flight numbers without leading zeros).
func WriteRotations(w io.Writer, rows []RotationAssignment) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(rotationColumns); err != nil {
		return fmt.Errorf("ssim: rotations: %w", err)
	}
	var rec [6]string
	for i, a := range rows {
		if a.Rotation == "" || strings.ContainsAny(a.Rotation, "\r\n") {
			return fmt.Errorf("ssim: rotations: row %d: rotation %q invalid: want non-empty text without line breaks", i, a.Rotation)
		}
		if strings.TrimSpace(a.Rotation) != a.Rotation {
			return fmt.Errorf("ssim: rotations: row %d: rotation %q has surrounding blanks, which reading would drop", i, a.Rotation)
		}
		if err := a.Leg.validate(); err != nil {
			return fmt.Errorf("ssim: rotations: row %d: %w", i, err)
		}
		d := a.Leg
		rec = [6]string{a.Rotation, d.Airline, strconv.Itoa(d.Number), d.Suffix, d.DayOfOrigin.String(), d.Origin}
		if err := cw.Write(rec[:]); err != nil {
			return fmt.Errorf("ssim: rotations: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("ssim: rotations: %w", err)
	}
	return nil
}
