package ssim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

const (
	recordLen = 200
	// excerptLen bounds Rejection.Record: enough to show record type, flight
	// and period, short enough for a log line.
	excerptLen = 40
	// maxInterned bounds the per-Read string table. Real files name a few
	// thousand stations and aircraft types; the bound only matters for
	// hostile input, whose strings are then simply not shared.
	maxInterned   = 1 << 14
	minutesPerDay = 1440
	cacheBits     = 8
	// maxVariation bounds a UTC/local time variation (±18:00, the range of
	// ISO 8601 offsets); anything beyond is a typo, not a time zone.
	maxVariation = 18 * 60
)

const upperLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// ErrNoHeader is returned (wrapped) by Read when the first record of the
// input is not a type 1 header record: the input is then not taken to be an
// SSIM file at all, and nothing is imported.
var ErrNoHeader = errors.New("no SSIM header record")

// Options control Read.
type Options struct {
	// Strict stops Read at the first rejection and returns it as the error
	// (a Rejection, see errors.As). Otherwise rejected records are
	// reported to OnReject and skipped.
	Strict bool
	// OnReject, if not nil, is called for every rejection, in line order,
	// also in Strict mode (before Read returns).
	OnReject func(Rejection)
	// OpenEnd is the end of open-ended periods (period to "00XXX00") whose
	// carrier record has an open-ended or blank validity-to as well. When
	// zero, such records are rejected.
	OpenEnd Date
}

// Stats counts what Read saw. Per-type counts include rejected records.
type Stats struct {
	Lines            int `json:"lines"`              // physical lines
	Padding          int `json:"padding"`            // all-zero and empty lines, skipped
	Records          int `json:"records"`            // every other line
	Headers          int `json:"headers"`            // type 1
	Carriers         int `json:"carriers"`           // type 2
	FlightLegRecords int `json:"flight_leg_records"` // type 3
	Segments         int `json:"segments"`           // type 4
	Trailers         int `json:"trailers"`           // type 5
	DatedLegs        int `json:"dated_legs"`         // legs passed to the callback
	Rejected         int `json:"rejected"`           // rejections reported
}

// Rejection reports a record that was not imported, or a structural problem
// between records (then Record is empty and no record was skipped because
// of it; the block structure is repaired as described in the package doc).
type Rejection struct {
	Line   int    // 1-based physical line number
	Record string // the record's first 40 bytes
	Reason string // e.g. `flight leg: days of operation "1X34567" invalid at column 30`
}

// Error returns "line N: reason", so a Rejection can be returned as an
// error in Strict mode.
func (r Rejection) Error() string { return fmt.Sprintf("line %d: %s", r.Line, r.Reason) }

// ReadAll reads every dated leg into memory. It is meant for small files
// and tests; bulk imports should stream with Read.
func ReadAll(r io.Reader, opts Options) ([]DatedLeg, Stats, error) {
	var legs []DatedLeg
	st, err := Read(r, opts, func(l DatedLeg) error {
		legs = append(legs, l)
		return nil
	})
	return legs, st, err
}

// Read parses an SSIM Chapter 7 file and calls fn once per dated leg, in
// file order and, within a record, in date order. fn may be nil to only
// validate and count. If fn returns an error, Read stops and returns it
// wrapped with the record's line. I/O errors, a missing header (ErrNoHeader)
// and, in Strict mode, the first rejection end Read with an error; the
// Stats returned always describe what was processed up to that point.
//
// Read holds one line and one record in memory at a time, so memory use
// does not depend on the size of the input.
func Read(r io.Reader, opts Options, fn func(DatedLeg) error) (Stats, error) {
	if fn == nil {
		fn = func(DatedLeg) error { return nil }
	}
	rd := &reader{opts: opts, fn: fn, strs: make(map[uint32]string, 256)}
	err := rd.run(bufio.NewReaderSize(r, 64<<10))
	return rd.st, err
}

const (
	stateStart   = iota // nothing read yet: a header must come first
	stateHeader         // between carrier blocks
	stateCarrier        // inside a carrier block (type 2 seen, type 5 not yet)
)

type reader struct {
	opts  Options
	fn    func(DatedLeg) error
	st    Stats
	strs  map[uint32]string
	cache [1 << cacheBits]struct {
		key uint32
		s   string
	}
	state int
	// trailerLine is the last trailer's line, for messages about records
	// that stray between blocks.
	trailerLine int
	car         carrier
	last        lastLeg
	lr          legRecord
}

// carrier is the open carrier block.
type carrier struct {
	line    int
	ok      bool // the carrier record was accepted
	airline string
	local   bool
	// validity as day numbers; hasFrom/hasTo false when open-ended or blank
	from, to       int
	hasFrom, hasTo bool
}

// lastLeg remembers the latest type 3 record of the block, which type 4
// records must belong to.
type lastLeg struct {
	line int
	ok   bool
	key  [10]byte // columns 2–11: suffix, airline, flight number, IVI
}

// legRecord is a parsed type 3 record, ready to expand.
type legRecord struct {
	leg            DatedLeg // template: everything but dates and times
	from, to       int      // period, day numbers
	days           uint8    // bit i set: operates on SSIM day i+1 (Monday = 1)
	fortnightly    bool
	depVar         int // departure date variation, days
	depMin, arrMin int // departure/arrival minutes after 00:00 UTC of the departure date
}

func (rd *reader) run(br *bufio.Reader) error {
	var first [excerptLen]byte
	for {
		b, err := br.ReadSlice('\n')
		long := 0
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than any record: keep an excerpt, count the rest.
			nf := copy(first[:], b)
			long = len(b)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				long += len(b)
			}
			long -= len(b) - len(trimEOL(b))
			b = first[:nf]
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("ssim: reading line %d: %w", rd.st.Lines+1, err)
		}
		if len(b) == 0 && long == 0 {
			break // EOF right after a line terminator
		}
		rd.st.Lines++
		if long > 0 {
			rd.st.Records++
			if rd.state == stateStart {
				return fmt.Errorf("ssim: line %d: %w: first record has length %d, want %d", rd.st.Lines, ErrNoHeader, long, recordLen)
			}
			if e := rd.reject(b, fmt.Sprintf("record length %d, want %d", long, recordLen)); e != nil {
				return e
			}
		} else {
			b = trimEOL(b)
			if rd.st.Lines == 1 {
				b = bytes.TrimPrefix(b, []byte("\xEF\xBB\xBF"))
			}
			if e := rd.record(b); e != nil {
				return e
			}
		}
		if err == io.EOF {
			break
		}
	}
	return rd.finish()
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

func isPadding(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}

func (rd *reader) finish() error {
	switch rd.state {
	case stateStart:
		return fmt.Errorf("ssim: %w: input has no records", ErrNoHeader)
	case stateCarrier:
		return rd.structural(rd.st.Lines+1, fmt.Sprintf("end of file: %s has no trailer record", rd.blockName()))
	}
	return nil
}

func (rd *reader) blockName() string {
	if rd.car.ok {
		return fmt.Sprintf("carrier block of %s (line %d)", rd.car.airline, rd.car.line)
	}
	return fmt.Sprintf("carrier block at line %d", rd.car.line)
}

// reject reports a rejected record; the returned error is non-nil only in
// Strict mode and ends Read.
func (rd *reader) reject(b []byte, reason string) error {
	n := min(len(b), excerptLen)
	return rd.report(Rejection{Line: rd.st.Lines, Record: string(b[:n]), Reason: reason})
}

func (rd *reader) structural(line int, reason string) error {
	return rd.report(Rejection{Line: line, Reason: reason})
}

func (rd *reader) report(r Rejection) error {
	rd.st.Rejected++
	if rd.opts.OnReject != nil {
		rd.opts.OnReject(r)
	}
	if rd.opts.Strict {
		return fmt.Errorf("ssim: %w", r)
	}
	return nil
}

func (rd *reader) record(b []byte) error {
	if isPadding(b) {
		rd.st.Padding++
		return nil
	}
	rd.st.Records++
	if rd.state == stateStart {
		switch {
		case b[0] != '1':
			return fmt.Errorf("ssim: line %d: %w: first record is type %q", rd.st.Lines, ErrNoHeader, b[0])
		case len(b) != recordLen:
			return fmt.Errorf("ssim: line %d: %w: first record has length %d, want %d", rd.st.Lines, ErrNoHeader, len(b), recordLen)
		}
	}
	switch b[0] {
	case '1':
		return rd.header(b)
	case '2':
		return rd.carrier(b)
	case '3':
		return rd.flightLeg(b)
	case '4':
		return rd.segment(b)
	case '5':
		return rd.trailer(b)
	case '0':
		i := bytes.IndexFunc(b, func(r rune) bool { return r != '0' })
		return rd.reject(b, fmt.Sprintf("unknown record type '0' (not a padding line: %q at column %d)", b[i], i+1))
	}
	return rd.reject(b, fmt.Sprintf("unknown record type %q", b[0]))
}

func badLength(kind string, b []byte) string {
	return fmt.Sprintf("%s: record length %d, want %d", kind, len(b), recordLen)
}

func (rd *reader) header(b []byte) error {
	rd.st.Headers++
	if rd.state == stateCarrier {
		rd.state = stateHeader
		if e := rd.structural(rd.st.Lines, fmt.Sprintf("header record inside %s, which has no trailer record", rd.blockName())); e != nil {
			return e
		}
	}
	rd.state = stateHeader
	if len(b) != recordLen {
		return rd.reject(b, badLength("header", b))
	}
	return nil
}

func (rd *reader) carrier(b []byte) error {
	rd.st.Carriers++
	if rd.state == stateCarrier {
		if e := rd.structural(rd.st.Lines, fmt.Sprintf("carrier record starts a new block but %s has no trailer record", rd.blockName())); e != nil {
			return e
		}
	}
	rd.state = stateCarrier
	rd.car = carrier{line: rd.st.Lines}
	rd.last = lastLeg{}
	if len(b) != recordLen {
		return rd.reject(b, badLength("carrier", b))
	}
	c := carrier{line: rd.st.Lines}
	switch b[1] {
	case 'U':
	case 'L':
		c.local = true
	default:
		return rd.reject(b, fmt.Sprintf("carrier: time mode %q invalid at column 2, want 'U' or 'L'", b[1]))
	}
	var ok bool
	if c.airline, ok = rd.airline(b[2:5]); !ok {
		return rd.reject(b, fmt.Sprintf("carrier: airline designator %q invalid at columns 3–5", b[2:5]))
	}
	var open bool
	if c.from, open, ok = parseValidity(b[14:21]); !ok {
		return rd.reject(b, fmt.Sprintf("carrier: validity from %q invalid at columns 15–21", b[14:21]))
	}
	c.hasFrom = !open
	if c.to, open, ok = parseValidity(b[21:28]); !ok {
		return rd.reject(b, fmt.Sprintf("carrier: validity to %q invalid at columns 22–28", b[21:28]))
	}
	c.hasTo = !open
	if c.hasFrom && c.hasTo && c.from > c.to {
		return rd.reject(b, fmt.Sprintf("carrier: validity from %s after validity to %s", b[14:21], b[21:28]))
	}
	c.ok = true
	rd.car = c
	return nil
}

// parseValidity accepts a date, "00XXX00" or blanks (both open).
func parseValidity(f []byte) (day int, open, ok bool) {
	if isBlank(f) {
		return 0, true, true
	}
	return parseDDMMMYY(f)
}

func (rd *reader) trailer(b []byte) error {
	rd.st.Trailers++
	if rd.state != stateCarrier {
		return rd.reject(b, "trailer: type 5 record outside a carrier block (no type 2 carrier record before it)")
	}
	// A rejected trailer still ends its block: the next record is far more
	// likely a new carrier than more legs of this one.
	rd.state = stateHeader
	rd.trailerLine = rd.st.Lines
	if len(b) != recordLen {
		return rd.reject(b, badLength("trailer", b))
	}
	if rd.car.ok {
		if a, ok := rd.airline(b[2:5]); !ok || a != rd.car.airline {
			return rd.reject(b, fmt.Sprintf("trailer: airline %q at columns 3–5 does not match carrier record airline %q (line %d)", b[2:5], rd.car.airline, rd.car.line))
		}
	}
	if c := b[193]; c != 'C' && c != 'E' {
		return rd.reject(b, fmt.Sprintf("trailer: continuation/end code %q invalid at column 194, want 'C' or 'E'", c))
	}
	return nil
}

func (rd *reader) segment(b []byte) error {
	rd.st.Segments++
	if rd.state != stateCarrier {
		return rd.outsideBlock(b, "segment", '4')
	}
	if len(b) != recordLen {
		return rd.reject(b, badLength("segment", b))
	}
	switch {
	case !rd.car.ok:
		return rd.reject(b, fmt.Sprintf("segment: its carrier record (line %d) was rejected", rd.car.line))
	case rd.last.line == 0:
		return rd.reject(b, "segment: type 4 record before any type 3 flight leg record in its carrier block")
	case !bytes.Equal(b[1:11], rd.last.key[:]):
		return rd.reject(b, fmt.Sprintf("segment: flight %q (columns 2–11) does not match the preceding flight leg record (line %d) %q", b[1:11], rd.last.line, rd.last.key[:]))
	case !rd.last.ok:
		return rd.reject(b, fmt.Sprintf("segment: its flight leg record (line %d) was rejected", rd.last.line))
	case !validStation(string(b[33:36])):
		return rd.reject(b, fmt.Sprintf("segment: board point %q invalid at columns 34–36", b[33:36]))
	case !validStation(string(b[36:39])):
		return rd.reject(b, fmt.Sprintf("segment: off point %q invalid at columns 37–39", b[36:39]))
	}
	return nil
}

func (rd *reader) outsideBlock(b []byte, kind string, typ byte) error {
	if rd.trailerLine > 0 {
		return rd.reject(b, fmt.Sprintf("%s: type %c record after the trailer record on line %d and before the next type 2 carrier record", kind, typ, rd.trailerLine))
	}
	return rd.reject(b, fmt.Sprintf("%s: type %c record before any type 2 carrier record", kind, typ))
}

func (rd *reader) flightLeg(b []byte) error {
	rd.st.FlightLegRecords++
	if rd.state != stateCarrier {
		return rd.outsideBlock(b, "flight leg", '3')
	}
	rd.last = lastLeg{line: rd.st.Lines}
	if len(b) >= 11 {
		copy(rd.last.key[:], b[1:11])
	}
	if !rd.car.ok {
		return rd.reject(b, fmt.Sprintf("flight leg: its carrier record (line %d) was rejected", rd.car.line))
	}
	if len(b) != recordLen {
		return rd.reject(b, badLength("flight leg", b))
	}
	lr := &rd.lr
	if reason := rd.parseLeg(b, lr); reason != "" {
		return rd.reject(b, "flight leg: "+reason)
	}
	rd.last.ok = true
	return rd.expand(b, lr)
}

func (rd *reader) expand(b []byte, lr *legRecord) error {
	leg := lr.leg
	mask := lr.days
	// Fortnights count from the Monday of the period's first week.
	week0 := lr.from - (ssimWeekday(lr.from) - 1)
	wd := ssimWeekday(lr.from) - 1
	n := 0
	for d := lr.from; d <= lr.to; d++ {
		if mask&(1<<wd) != 0 && (!lr.fortnightly || ((d-week0)/7)%2 == 0) {
			leg.DayOfOrigin = dateFromDays(d - lr.depVar)
			base := int64(d) * minutesPerDay
			leg.Departure = time.Unix((base+int64(lr.depMin))*60, 0).UTC()
			leg.Arrival = time.Unix((base+int64(lr.arrMin))*60, 0).UTC()
			if err := rd.fn(leg); err != nil {
				return fmt.Errorf("ssim: line %d: %w", leg.Record, err)
			}
			rd.st.DatedLegs++
			n++
		}
		if wd++; wd == 7 {
			wd = 0
		}
	}
	if n == 0 {
		return rd.reject(b, fmt.Sprintf("flight leg: period %s–%s has no day of operation %q", b[14:21], b[21:28], b[28:35]))
	}
	return nil
}

// parseLeg fills lr from a type 3 record of the open, accepted carrier
// block. It returns "" or the reason for rejection; reasons are built only
// on failure so that the happy path does not allocate.
func (rd *reader) parseLeg(b []byte, lr *legRecord) string {
	car := &rd.car
	*lr = legRecord{}
	l := &lr.leg
	l.Record = rd.st.Lines

	switch s := b[1]; {
	case s == ' ':
	case isUpper(s):
		l.Suffix = upperLetters[s-'A' : s-'A'+1]
	default:
		return fmt.Sprintf("operational suffix %q invalid at column 2", s)
	}
	var ok bool
	if l.Airline, ok = rd.airline(b[2:5]); !ok {
		return fmt.Sprintf("airline designator %q invalid at columns 3–5", b[2:5])
	}
	if l.Airline != car.airline {
		return fmt.Sprintf("airline %q does not match carrier record airline %q (line %d)", l.Airline, car.airline, car.line)
	}
	if isBlank(b[5:9]) {
		return "flight number missing at columns 6–9"
	}
	if l.Number, ok = parseRightJustified(b[5:9]); !ok {
		return fmt.Sprintf("flight number %q invalid at columns 6–9", b[5:9])
	}
	if l.IVI, ok = parse2(b[9:11]); !ok {
		return fmt.Sprintf("itinerary variation identifier %q invalid at columns 10–11, want 01–99", b[9:11])
	}
	if l.LegSeq, ok = parse2(b[11:13]); !ok {
		return fmt.Sprintf("leg sequence number %q invalid at columns 12–13, want 01–99", b[11:13])
	}
	switch s := b[13]; {
	case s == ' ':
		return "service type missing at column 14"
	case !isUpper(s):
		return fmt.Sprintf("service type %q invalid at column 14", s)
	default:
		l.ServiceType = s
	}

	if r := rd.period(b, lr); r != "" {
		return r
	}
	for i := range 7 {
		switch c := b[28+i]; c {
		case ' ':
		case byte('1' + i):
			lr.days |= 1 << i
		default:
			return fmt.Sprintf("days of operation %q invalid at column %d", b[28:35], 29+i)
		}
	}
	if lr.days == 0 {
		return "days of operation missing at columns 29–35"
	}
	switch c := b[35]; c {
	case ' ', '1':
	case '2':
		lr.fortnightly = true
	default:
		return fmt.Sprintf("frequency rate %q invalid at column 36, want blank or '2'", c)
	}

	if l.Origin, ok = rd.station(b[36:39]); !ok {
		return stationReason("departure station", b[36:39], 37)
	}
	std, r := scheduleTime(b[43:47], b[39:43], "aircraft STD", 44, 40)
	if r != "" {
		return r
	}
	depVar, r := variation(b[47:52], "departure", 48, car.local)
	if r != "" {
		return r
	}
	if l.Destination, ok = rd.station(b[54:57]); !ok {
		return stationReason("arrival station", b[54:57], 55)
	}
	sta, r := scheduleTime(b[57:61], b[61:65], "aircraft STA", 58, 62)
	if r != "" {
		return r
	}
	arrVar, r := variation(b[65:70], "arrival", 66, car.local)
	if r != "" {
		return r
	}
	if isBlank(b[72:75]) {
		return "aircraft type missing at columns 73–75"
	}
	if l.AircraftType, ok = rd.aircraftType(b[72:75]); !ok {
		return fmt.Sprintf("aircraft type %q invalid at columns 73–75", b[72:75])
	}
	if r := rd.onward(b, l); r != "" {
		return r
	}

	dv, ok := dateVariation(b[192])
	if !ok {
		return fmt.Sprintf("date variation of departure %q invalid at column 193, want blank, 0–9, 'A' or 'J'", b[192])
	}
	av, ok := dateVariation(b[193])
	if !ok {
		return fmt.Sprintf("date variation of arrival %q invalid at column 194, want blank, 0–9, 'A' or 'J'", b[193])
	}
	if !car.local {
		depVar, arrVar = 0, 0
	}
	lr.depVar = dv
	lr.depMin = std - depVar
	if b[193] == ' ' {
		// Producers often leave the arrival variation blank on overnight
		// legs; the arrival is then the first STA after the departure on
		// the departure date or the day after.
		lr.arrMin = sta - arrVar
		if lr.arrMin <= lr.depMin {
			lr.arrMin += minutesPerDay
		}
	} else {
		lr.arrMin = (av-dv)*minutesPerDay + sta - arrVar
	}
	if lr.arrMin <= lr.depMin {
		base := int64(lr.from) * minutesPerDay
		return fmt.Sprintf("arrival %s is not after departure %s (aircraft STA %s, STD %s, date variations %q)",
			time.Unix((base+int64(lr.arrMin))*60, 0).UTC().Format("2006-01-02T15:04Z"),
			time.Unix((base+int64(lr.depMin))*60, 0).UTC().Format("2006-01-02T15:04Z"),
			b[57:61], b[43:47], b[192:194])
	}
	return ""
}

// period resolves the period of operation, open ends included.
func (rd *reader) period(b []byte, lr *legRecord) string {
	car := &rd.car
	from, open, ok := parseDDMMMYY(b[14:21])
	switch {
	case !ok:
		return fmt.Sprintf("period from %q invalid at columns 15–21", b[14:21])
	case open && !car.hasFrom:
		return fmt.Sprintf("period from is open-ended (00XXX00) and the carrier record (line %d) has no validity from", car.line)
	case open:
		from = car.from
	}
	to, open, ok := parseDDMMMYY(b[21:28])
	switch {
	case !ok:
		return fmt.Sprintf("period to %q invalid at columns 22–28", b[21:28])
	case open && car.hasTo:
		to = car.to
	case open && !rd.opts.OpenEnd.IsZero():
		to = rd.opts.OpenEnd.days()
	case open:
		return fmt.Sprintf("period to is open-ended (00XXX00) and the carrier record (line %d) has no validity to", car.line)
	}
	if from > to {
		return fmt.Sprintf("period from %s after period to %s", dateFromDays(from), dateFromDays(to))
	}
	lr.from, lr.to = from, to
	return ""
}

func (rd *reader) onward(b []byte, l *DatedLeg) string {
	air, num := b[137:140], b[140:144]
	if isBlank(air) && isBlank(num) {
		// A layover or suffix without a flight says nothing: ignore it.
		return ""
	}
	o := &l.Onward
	var ok bool
	switch {
	case isBlank(air):
		return fmt.Sprintf("onward flight airline missing at columns 138–140 (onward flight number %q)", num)
	case isBlank(num):
		return "onward flight number missing at columns 141–144"
	}
	if o.Airline, ok = rd.airline(air); !ok {
		return fmt.Sprintf("onward flight airline %q invalid at columns 138–140", air)
	}
	if o.Number, ok = parseRightJustified(num); !ok {
		return fmt.Sprintf("onward flight number %q invalid at columns 141–144", num)
	}
	switch c := b[144]; {
	case c == ' ':
	case isDigit(c):
		o.Layover = int(c - '0')
	default:
		return fmt.Sprintf("aircraft rotation layover %q invalid at column 145, want blank or 0–9", c)
	}
	switch s := b[145]; {
	case s == ' ':
	case isUpper(s):
		o.Suffix = upperLetters[s-'A' : s-'A'+1]
	default:
		return fmt.Sprintf("onward flight operational suffix %q invalid at column 146", s)
	}
	return ""
}

func stationReason(name string, f []byte, col int) string {
	if isBlank(f) {
		return fmt.Sprintf("%s missing at columns %d–%d", name, col, col+2)
	}
	return fmt.Sprintf("%s %q invalid at columns %d–%d", name, f, col, col+2)
}

// scheduleTime parses the aircraft time and falls back to the passenger
// time when the aircraft time is blank: many producers fill only one.
func scheduleTime(aircraft, passenger []byte, name string, col, paxCol int) (int, string) {
	f, c := aircraft, col
	if isBlank(f) {
		if isBlank(passenger) {
			return 0, fmt.Sprintf("%s missing at columns %d–%d (passenger time at columns %d–%d blank too)", name, col, col+3, paxCol, paxCol+3)
		}
		f, c = passenger, paxCol
		name = "passenger" + name[len("aircraft"):]
	}
	m, ok := parseHHMM(f)
	if !ok {
		return 0, fmt.Sprintf("%s %q invalid at columns %d–%d, want HHMM 0000–2400", name, f, c, c+3)
	}
	return m, ""
}

func variation(f []byte, side string, col int, required bool) (int, string) {
	if isBlank(f) {
		if required {
			return 0, fmt.Sprintf("%s UTC/local time variation missing at columns %d–%d (required in local time mode)", side, col, col+4)
		}
		return 0, ""
	}
	v, ok := parseVariation(f)
	if !ok {
		return 0, fmt.Sprintf("%s UTC/local time variation %q invalid at columns %d–%d, want ±HHMM", side, f, col, col+4)
	}
	return v, ""
}

// airline parses a left-justified 2–3 character airline designator field.
func (rd *reader) airline(f []byte) (string, bool) {
	f = trimRight(f)
	if !validAirline(string(f)) {
		return "", false
	}
	return rd.str(f), true
}

func (rd *reader) aircraftType(f []byte) (string, bool) {
	f = trimRight(f)
	if !validAircraftType(string(f)) {
		return "", false
	}
	return rd.str(f), true
}

func (rd *reader) station(f []byte) (string, bool) {
	if !validStation(string(f)) {
		return "", false
	}
	return rd.str(f), true
}

// trimRight drops the trailing blanks of a left-justified field.
func trimRight(f []byte) []byte {
	for len(f) > 0 && f[len(f)-1] == ' ' {
		f = f[:len(f)-1]
	}
	return f
}

// str interns a field of at most 3 bytes (airline, station, aircraft
// type: all the strings of a DatedLeg), so that the strings are shared by
// all legs of a file instead of allocated per record. The bytes are packed
// into an integer key; a direct-mapped cache in front of the map answers
// most lookups, which matters for files with one dated leg per record.
func (rd *reader) str(b []byte) string {
	k := uint32(len(b)) << 24
	for i, c := range b {
		k |= uint32(c) << (16 - 8*i)
	}
	slot := &rd.cache[(k*0x9E3779B1)>>(32-cacheBits)]
	if slot.key == k {
		return slot.s
	}
	s, ok := rd.strs[k]
	if !ok {
		s = string(b)
		if len(rd.strs) < maxInterned {
			rd.strs[k] = s
		}
	}
	slot.key, slot.s = k, s
	return s
}

func isBlank(f []byte) bool {
	for _, c := range f {
		if c != ' ' {
			return false
		}
	}
	return true
}

// parseRightJustified parses a blank-padded number such as " 400" or
// "0400".
func parseRightJustified(f []byte) (int, bool) {
	i := 0
	for i < len(f) && f[i] == ' ' {
		i++
	}
	if i == len(f) {
		return 0, false
	}
	n := 0
	for ; i < len(f); i++ {
		if !isDigit(f[i]) {
			return 0, false
		}
		n = n*10 + int(f[i]-'0')
	}
	return n, true
}

// parse2 parses 01–99.
func parse2(f []byte) (int, bool) {
	if !isDigit(f[0]) || !isDigit(f[1]) {
		return 0, false
	}
	n := int(f[0]-'0')*10 + int(f[1]-'0')
	return n, n > 0
}

func parseHHMM(f []byte) (int, bool) {
	for _, c := range f {
		if !isDigit(c) {
			return 0, false
		}
	}
	h := int(f[0]-'0')*10 + int(f[1]-'0')
	m := int(f[2]-'0')*10 + int(f[3]-'0')
	if m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, false
	}
	return h*60 + m, true
}

func parseVariation(f []byte) (int, bool) {
	sign := 1
	switch f[0] {
	case '+':
	case '-':
		sign = -1
	default:
		return 0, false
	}
	for _, c := range f[1:] {
		if !isDigit(c) {
			return 0, false
		}
	}
	h := int(f[1]-'0')*10 + int(f[2]-'0')
	m := int(f[3]-'0')*10 + int(f[4]-'0')
	v := h*60 + m
	if m > 59 || v > maxVariation {
		return 0, false
	}
	return sign * v, true
}

func dateVariation(c byte) (int, bool) {
	switch {
	case c == ' ':
		return 0, true
	case isDigit(c):
		return int(c - '0'), true
	case c == 'A' || c == 'J':
		return -1, true
	}
	return 0, false
}

const monthNames = "JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC"

// parseDDMMMYY parses an SSIM date; "00XXX00" is open-ended.
func parseDDMMMYY(f []byte) (day int, open, ok bool) {
	if string(f) == "00XXX00" {
		return 0, true, true
	}
	if !isDigit(f[0]) || !isDigit(f[1]) || !isDigit(f[5]) || !isDigit(f[6]) {
		return 0, false, false
	}
	m := 0
	for i := 0; i < len(monthNames); i += 3 {
		if monthNames[i] == f[2] && monthNames[i+1] == f[3] && monthNames[i+2] == f[4] {
			m = i/3 + 1
			break
		}
	}
	if m == 0 {
		return 0, false, false
	}
	d := int(f[0]-'0')*10 + int(f[1]-'0')
	y := int(f[5]-'0')*10 + int(f[6]-'0')
	if y < 70 {
		y += 2000
	} else {
		y += 1900
	}
	if d < 1 || d > daysIn(time.Month(m), y) {
		return 0, false, false
	}
	return Date{y, time.Month(m), d}.days(), false, true
}

// appendDDMMMYY is the inverse of parseDDMMMYY for years 1970–2069.
func appendDDMMMYY(b []byte, day int) []byte {
	d := dateFromDays(day)
	m := int(d.Month) - 1
	y := d.Year % 100
	return append(b, byte('0'+d.Day/10), byte('0'+d.Day%10),
		monthNames[3*m], monthNames[3*m+1], monthNames[3*m+2],
		byte('0'+y/10), byte('0'+y%10))
}
