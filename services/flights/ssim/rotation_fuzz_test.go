package ssim

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzReadRotations feeds the rotation-file reader arbitrary bytes. It must
// not panic; every rejection names its line and a reason; every assignment
// it accepts is one the writer takes, and writing the assignments and
// reading them back gives the same assignments.
func FuzzReadRotations(f *testing.F) {
	f.Add([]byte(RotationHeader + "\nR1,LH,400,,2026-03-30,FRA\nR1,LH,401,,2026-03-30,JFK\n"))
	f.Add([]byte("\uFEFF" + RotationHeader + "\r\n\"R 4\",LH,402,A,2026-04-01,FRA\r\n\r\nR2, LH ,0001,,2026-04-13,MUC\r\n"))
	f.Add([]byte(RotationHeader + "\nR3,\"LH\"x,400,,2026-03-30,FRA\nR3,LH,400,,2026-02-30,FRA,extra\n,LH,1,,2026-01-01,FRA\n"))
	f.Add([]byte(RotationHeader + "\n\"R\x01\",LH,400,,2026-03-30,FRA\n\"a\nb\",LH,400,,2026-03-30,FRA\n"))
	f.Add([]byte("rotation,\"airline\nR1\n"))
	f.Add([]byte(""))

	f.Fuzz(func(t *testing.T, src []byte) {
		got, rejs, err := ReadRotations(bytes.NewReader(src))
		// Only a header can end reading (a bytes.Reader has no I/O
		// errors), and nothing comes before it.
		if err != nil && (len(got) > 0 || len(rejs) > 0) {
			t.Fatalf("error %v after %d assignments and %d rejections", err, len(got), len(rejs))
		}
		for _, r := range rejs {
			if r.Line < 1 || r.Reason == "" || len(r.Record) > excerptLen {
				t.Fatalf("bad rejection %+v", r)
			}
		}
		for _, a := range got {
			if a.Line < 2 || a.Rotation == "" || len(a.Rotation) > MaxRotationID || !utf8.ValidString(a.Rotation) ||
				strings.ContainsFunc(a.Rotation, unicode.IsControl) || strings.TrimSpace(a.Rotation) != a.Rotation {
				t.Fatalf("accepted a bad assignment %+v", a)
			}
			if err := a.Leg.validate(); err != nil {
				t.Fatalf("accepted an invalid leg %+v: %v", a, err)
			}
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteRotations(&buf, got); err != nil {
			t.Fatalf("the writer refuses what the reader accepted: %v", err)
		}
		back, rejs, err := ReadRotations(&buf)
		if err != nil || len(rejs) > 0 {
			t.Fatalf("written file does not read back: %v %+v", err, rejs)
		}
		strip := func(as []RotationAssignment) []RotationAssignment {
			out := slices.Clone(as)
			for i := range out {
				out[i].Line = 0
			}
			return out
		}
		if !slices.Equal(strip(back), strip(got)) {
			t.Fatalf("round trip\n got %+v\nwant %+v", back, got)
		}
	})
}
