package ssim

import (
	"fmt"
	"time"
)

// Date is a civil date: a day in the proleptic Gregorian calendar with no
// time zone. A day of origin is a date of the schedule, not an instant, so
// it must not be a time.Time, which would drag a zone and a clock into
// comparisons.
//
// The zero Date (0000-00-00) means "no date"; see IsZero.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf returns the date of t in t's location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{y, m, d}
}

// ParseDate parses the ISO 8601 calendar form "2026-03-29", the form
// String returns.
func ParseDate(s string) (Date, error) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return Date{}, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	y, ok1 := atoiFixed(s[0:4])
	m, ok2 := atoiFixed(s[5:7])
	d, ok3 := atoiFixed(s[8:10])
	if !ok1 || !ok2 || !ok3 {
		return Date{}, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	dt := Date{y, time.Month(m), d}
	if !dt.IsValid() {
		return Date{}, fmt.Errorf("date %q: no such day", s)
	}
	return dt, nil
}

func atoiFixed(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// String returns the date as "2026-03-29".
func (d Date) String() string {
	return string(d.appendTo(make([]byte, 0, 10)))
}

func (d Date) appendTo(b []byte) []byte {
	y := d.Year
	if y < 0 || y > 9999 {
		return fmt.Appendf(b, "%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
	}
	m, dd := int(d.Month), d.Day
	if m < 0 || m > 99 || dd < 0 || dd > 99 {
		return fmt.Appendf(b, "%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
	}
	return append(b,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10), '-',
		byte('0'+dd/10), byte('0'+dd%10))
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (d Date) MarshalText() ([]byte, error) {
	return d.appendTo(make([]byte, 0, 10)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseDate.
func (d *Date) UnmarshalText(b []byte) error {
	v, err := ParseDate(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// IsZero reports whether d is the zero Date.
func (d Date) IsZero() bool { return d == Date{} }

// IsValid reports whether d names a real calendar day (years 1–9999).
func (d Date) IsValid() bool {
	if d.Year < 1 || d.Year > 9999 || d.Month < 1 || d.Month > 12 || d.Day < 1 {
		return false
	}
	return d.Day <= daysIn(d.Month, d.Year)
}

// AddDays returns d shifted by n days.
func (d Date) AddDays(n int) Date { return dateFromDays(d.days() + n) }

// Sub returns the number of days from e to d (d − e).
func (d Date) Sub(e Date) int { return d.days() - e.days() }

// Compare returns −1, 0 or +1 as d is before, equal to or after e.
func (d Date) Compare(e Date) int {
	switch {
	case d.Year != e.Year:
		return cmpInt(d.Year, e.Year)
	case d.Month != e.Month:
		return cmpInt(int(d.Month), int(e.Month))
	default:
		return cmpInt(d.Day, e.Day)
	}
}

// Before reports whether d is before e.
func (d Date) Before(e Date) bool { return d.Compare(e) < 0 }

// After reports whether d is after e.
func (d Date) After(e Date) bool { return d.Compare(e) > 0 }

// Weekday returns the day of the week of d.
func (d Date) Weekday() time.Weekday {
	// Day 0 (1970-01-01) was a Thursday.
	return time.Weekday(floorMod(d.days()+4, 7))
}

// Time returns midnight UTC at the start of d.
func (d Date) Time() time.Time {
	return time.Unix(int64(d.days())*secondsPerDay, 0).UTC()
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const secondsPerDay = 86400

func daysIn(m time.Month, y int) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// days returns the number of days since 1970-01-01. The expansion loop works
// on day numbers because adding days and finding weekdays are then single
// integer operations; the conversions follow H. Hinnant's civil-date
// algorithms, which are exact over the whole proleptic Gregorian calendar.
func (d Date) days() int {
	y, m := d.Year, int(d.Month)
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d.Day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func dateFromDays(z int) Date {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return Date{y, time.Month(m), d}
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int) int { return a - floorDiv(a, b)*b }

// ssimWeekday returns the SSIM day number of a day number: 1 = Monday …
// 7 = Sunday.
func ssimWeekday(day int) int { return floorMod(day+3, 7) + 1 }
