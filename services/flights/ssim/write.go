package ssim

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// CarrierInfo describes one carrier block of a written file.
type CarrierInfo struct {
	Airline   string // 2–3 characters; every leg written in the block must have it
	Season    string // optional, up to 3 characters, e.g. "S26"
	ValidFrom Date   // zero: written as open-ended (00XXX00)
	ValidTo   Date   // zero: written as open-ended (00XXX00)
	Created   Date   // creation and release date; zero: left blank
	Title     string // optional, up to 29 characters
}

func (c CarrierInfo) validate() error {
	switch {
	case !validAirline(c.Airline):
		return fmt.Errorf("carrier airline %q invalid: want 2–3 characters A–Z, 0–9", c.Airline)
	case len(c.Season) > 3 || !printable(c.Season):
		return fmt.Errorf("carrier season %q invalid: want up to 3 printable ASCII characters", c.Season)
	case len(c.Title) > 29 || !printable(c.Title):
		return fmt.Errorf("carrier title %q invalid: want up to 29 printable ASCII characters", c.Title)
	}
	for _, d := range []struct {
		name string
		d    Date
	}{{"validity from", c.ValidFrom}, {"validity to", c.ValidTo}, {"creation date", c.Created}} {
		if !d.d.IsZero() && !writableDate(d.d) {
			return fmt.Errorf("carrier %s %v invalid: want a real day in 1970–2069", d.name, d.d)
		}
	}
	if !c.ValidFrom.IsZero() && !c.ValidTo.IsZero() && c.ValidFrom.After(c.ValidTo) {
		return fmt.Errorf("carrier validity from %v after validity to %v", c.ValidFrom, c.ValidTo)
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// writableDate reports whether d fits a two-digit-year SSIM date that reads
// back as d.
func writableDate(d Date) bool { return d.IsValid() && d.Year >= 1970 && d.Year <= 2069 }

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("ssim: writer closed")

// Writer writes dated legs as an SSIM Chapter 7 file in UTC time mode:
// a header record, then per carrier a carrier record, the flight leg
// records and a trailer record. Record serial numbers count up across the
// file (wrapping from 999999 to 000002) and every group of records is
// padded with zero lines to a multiple of 5 lines, as mainframe producers
// do.
//
// A plain Writer (NewWriter) writes one type 3 record per dated leg, in
// the order given, so it streams in constant memory. A compact Writer
// (NewCompactWriter) groups legs that differ only in their dates into
// records with a period, days of operation and frequency rate; it holds 4
// bytes per dated leg plus one entry per distinct leg until the carrier
// block ends, and writes records sorted by flight number, suffix, IVI, leg
// sequence and first date. Either way Read returns exactly the legs
// written (Record aside), the compact form possibly in another order.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	bw      *bufio.Writer
	car     CarrierInfo
	compact bool
	begun   bool // header written
	inBlock bool // carrier record of car written
	closed  bool
	err     error // sticky: an I/O or carrier error ends the file
	serial  int   // serial number of the last record written
	lines   int   // lines written, padding included

	groups map[legKey]int
	list   []group
	weeks  []week
	rec    [recordLen + 1]byte
}

// NewWriter returns a Writer that writes one flight leg record per dated
// leg. Nothing is written until the first Write or Close.
func NewWriter(w io.Writer, carrier CarrierInfo) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10), car: carrier}
}

// NewCompactWriter returns a Writer that groups dated legs into weekly or
// fortnightly patterns; see Writer.
func NewCompactWriter(w io.Writer, carrier CarrierInfo) *Writer {
	wr := NewWriter(w, carrier)
	wr.compact = true
	wr.groups = make(map[legKey]int)
	return wr
}

// legKey is everything a flight leg record says about a dated leg except
// its date.
type legKey struct {
	airline      string
	number       int
	suffix       string
	ivi, legSeq  int
	service      byte
	origin, dest string
	aircraft     string
	onward       Onward
	std, sta     int // UTC minutes of the departure and arrival dates
	depVar       int // departure date − day of origin
	arrVar       int // arrival date − day of origin
}

type group struct {
	key  legKey
	days []int32 // departure dates
}

type week struct {
	monday      int
	mask        uint8
	first, last int
}

// Write writes one dated leg, or in compact mode queues it. A leg that
// cannot be written (invalid field, airline of another carrier, a time with
// seconds, a departure outside 1970–2069, date variations outside −1…9,
// arrival not after departure) is refused with an error and the Writer
// stays usable.
func (w *Writer) Write(leg DatedLeg) error {
	if err := w.begin(); err != nil {
		return err
	}
	k, day, err := w.plan(&leg)
	if err != nil {
		if leg.Record > 0 {
			return fmt.Errorf("ssim: writing %v (read from line %d): %w", leg.Designator(), leg.Record, err)
		}
		return fmt.Errorf("ssim: writing %v: %w", leg.Designator(), err)
	}
	if w.compact {
		i, ok := w.groups[k]
		if !ok {
			i = len(w.list)
			w.groups[k] = i
			w.list = append(w.list, group{key: k})
		}
		w.list[i].days = append(w.list[i].days, int32(day))
		return nil
	}
	return w.flightLeg(&k, day, day, 1<<(ssimWeekday(day)-1), false)
}

// NextCarrier ends the current carrier block and starts one for c.
func (w *Writer) NextCarrier(c CarrierInfo) error {
	if err := w.begin(); err != nil {
		return err
	}
	if err := w.endBlock('C'); err != nil {
		return err
	}
	w.car = c
	return w.begin()
}

// Close ends the last carrier block, writes the trailer and flushes. It
// does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	err := w.begin()
	if err == nil {
		err = w.endBlock('E')
	}
	if err == nil {
		err = w.bw.Flush()
		if err != nil {
			err = fmt.Errorf("ssim: %w", err)
		}
	}
	w.closed = true
	if err != nil {
		w.err = err
	} else {
		w.err = ErrClosed
	}
	return err
}

// begin writes the header and the carrier record where still due.
func (w *Writer) begin() error {
	if w.err != nil {
		return w.err
	}
	if !w.begun {
		w.begun = true
		b := w.blank('1')
		copy(b[1:], "AIRLINE STANDARD SCHEDULE DATA SET")
		b[40] = '1'
		copy(b[191:194], "001")
		w.emit()
		w.pad()
	}
	if !w.inBlock {
		if err := w.car.validate(); err != nil {
			w.err = fmt.Errorf("ssim: %w", err)
			return w.err
		}
		w.inBlock = true
		c := &w.car
		b := w.blank('2')
		b[1] = 'U'
		copy(b[2:5], c.Airline)
		copy(b[10:13], c.Season)
		putValidity(b[14:21], c.ValidFrom)
		putValidity(b[21:28], c.ValidTo)
		if !c.Created.IsZero() {
			appendDDMMMYY(b[28:28], c.Created.days())
			appendDDMMMYY(b[64:64], c.Created.days())
		}
		copy(b[35:64], c.Title)
		w.emit()
		w.pad()
	}
	return w.err
}

func putValidity(b []byte, d Date) {
	if d.IsZero() {
		copy(b, "00XXX00")
		return
	}
	appendDDMMMYY(b[:0], d.days())
}

func (w *Writer) endBlock(code byte) error {
	if w.compact {
		if err := w.flushGroups(); err != nil {
			return err
		}
	}
	w.pad()
	prev := w.serial
	b := w.blank('5')
	copy(b[2:5], w.car.Airline)
	if !w.car.Created.IsZero() {
		appendDDMMMYY(b[5:5], w.car.Created.days())
	}
	putSerial(b[187:193], prev)
	b[193] = code
	w.emit()
	w.pad()
	w.inBlock = false
	return w.err
}

// plan validates a leg and splits it into its record fields and its
// departure date (a day number).
func (w *Writer) plan(l *DatedLeg) (legKey, int, error) {
	var k legKey
	if err := l.Designator().validate(); err != nil {
		return k, 0, err
	}
	switch {
	case l.Airline != w.car.Airline:
		return k, 0, fmt.Errorf("airline %q is not the carrier's %q", l.Airline, w.car.Airline)
	case l.IVI < 1 || l.IVI > 99:
		return k, 0, fmt.Errorf("IVI %d out of range 1–99", l.IVI)
	case l.LegSeq < 1 || l.LegSeq > 99:
		return k, 0, fmt.Errorf("leg sequence number %d out of range 1–99", l.LegSeq)
	case !isUpper(l.ServiceType):
		return k, 0, fmt.Errorf("service type %q invalid: want A–Z", l.ServiceType)
	case !validStation(l.Destination):
		return k, 0, fmt.Errorf("arrival airport %q invalid: want 3 letters A–Z", l.Destination)
	case !validAircraftType(l.AircraftType):
		return k, 0, fmt.Errorf("aircraft type %q invalid: want 1–3 characters A–Z, 0–9", l.AircraftType)
	}
	if o := l.Onward; !o.IsZero() {
		switch {
		case !validAirline(o.Airline):
			return k, 0, fmt.Errorf("onward airline %q invalid", o.Airline)
		case o.Number < 0 || o.Number > 9999:
			return k, 0, fmt.Errorf("onward flight number %d out of range 0–9999", o.Number)
		case !validSuffix(o.Suffix):
			return k, 0, fmt.Errorf("onward suffix %q invalid", o.Suffix)
		case o.Layover < 0 || o.Layover > 9:
			return k, 0, fmt.Errorf("onward layover %d out of range 0–9", o.Layover)
		}
	}
	dep, arr := l.Departure.Unix(), l.Arrival.Unix()
	switch {
	case l.Departure.Nanosecond() != 0 || dep%60 != 0:
		return k, 0, fmt.Errorf("departure %v is not a whole minute", l.Departure)
	case l.Arrival.Nanosecond() != 0 || arr%60 != 0:
		return k, 0, fmt.Errorf("arrival %v is not a whole minute", l.Arrival)
	case arr <= dep:
		return k, 0, fmt.Errorf("arrival %v not after departure %v", l.Arrival, l.Departure)
	}
	depDay := int(floorDivInt64(dep, secondsPerDay))
	arrDay := int(floorDivInt64(arr, secondsPerDay))
	if !writableDate(dateFromDays(depDay)) {
		return k, 0, fmt.Errorf("departure date %v outside 1970–2069", dateFromDays(depDay))
	}
	origin := l.DayOfOrigin.days()
	k = legKey{
		airline: l.Airline, number: l.Number, suffix: l.Suffix,
		ivi: l.IVI, legSeq: l.LegSeq, service: l.ServiceType,
		origin: l.Origin, dest: l.Destination, aircraft: l.AircraftType,
		onward: l.Onward,
		std:    int(dep-int64(depDay)*secondsPerDay) / 60,
		sta:    int(arr-int64(arrDay)*secondsPerDay) / 60,
		depVar: depDay - origin,
		arrVar: arrDay - origin,
	}
	if k.depVar < -1 || k.depVar > 9 {
		return k, 0, fmt.Errorf("departure date %v is %d days after day of origin: SSIM allows −1…9", dateFromDays(depDay), k.depVar)
	}
	if k.arrVar < -1 || k.arrVar > 9 {
		return k, 0, fmt.Errorf("arrival date %v is %d days after day of origin: SSIM allows −1…9", dateFromDays(arrDay), k.arrVar)
	}
	return k, depDay, nil
}

func floorDivInt64(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// flightLeg writes one type 3 record for the departure dates from…to.
func (w *Writer) flightLeg(k *legKey, from, to int, days uint8, fortnightly bool) error {
	b := w.blank('3')
	if k.suffix != "" {
		b[1] = k.suffix[0]
	}
	copy(b[2:5], k.airline)
	putRight(b[5:9], k.number)
	putZero(b[9:11], k.ivi)
	putZero(b[11:13], k.legSeq)
	b[13] = k.service
	appendDDMMMYY(b[14:14], from)
	appendDDMMMYY(b[21:21], to)
	for i := range 7 {
		if days&(1<<i) != 0 {
			b[28+i] = byte('1' + i)
		}
	}
	if fortnightly {
		b[35] = '2'
	}
	copy(b[36:39], k.origin)
	putZero(b[39:43], k.std/60*100+k.std%60)
	copy(b[43:47], b[39:43])
	copy(b[47:52], "+0000")
	copy(b[54:57], k.dest)
	putZero(b[57:61], k.sta/60*100+k.sta%60)
	copy(b[61:65], b[57:61])
	copy(b[65:70], "+0000")
	copy(b[72:75], k.aircraft)
	if o := &k.onward; !o.IsZero() {
		copy(b[137:140], o.Airline)
		putRight(b[140:144], o.Number)
		b[144] = byte('0' + o.Layover)
		if o.Suffix != "" {
			b[145] = o.Suffix[0]
		}
	}
	b[192] = variationCode(k.depVar)
	b[193] = variationCode(k.arrVar)
	w.emit()
	return w.err
}

func variationCode(v int) byte {
	if v < 0 {
		return 'A'
	}
	return byte('0' + v)
}

// flushGroups writes the queued legs of a compact Writer's block.
func (w *Writer) flushGroups() error {
	for i := range w.list {
		slices.Sort(w.list[i].days)
	}
	// Sorting indices keeps the swaps cheap; the index as last key keeps
	// the order of first writing among equal keys, so output is
	// deterministic.
	order := make([]int, len(w.list))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &w.list[i].key, &w.list[j].key
		return cmp.Or(
			cmp.Compare(a.number, b.number),
			strings.Compare(a.suffix, b.suffix),
			cmp.Compare(a.ivi, b.ivi),
			cmp.Compare(a.legSeq, b.legSeq),
			cmp.Compare(w.list[i].days[0], w.list[j].days[0]),
			cmp.Compare(i, j),
		)
	})
	for _, i := range order {
		g := &w.list[i]
		days := g.days
		for len(days) > 0 {
			// A date queued twice (a duplicate dated leg) cannot share a
			// record with itself: peel duplicates off into further rounds
			// so that the file still holds every leg written.
			uniq, rest := splitDuplicates(days)
			if err := w.writeWeeks(&g.key, uniq); err != nil {
				return err
			}
			days = rest
		}
	}
	clear(w.groups)
	w.list = w.list[:0]
	return w.err
}

// splitDuplicates moves the first occurrence of each day of the sorted days
// to the front and returns both parts, each still sorted.
func splitDuplicates(days []int32) (uniq, rest []int32) {
	n := 0
	for i, d := range days {
		if i == 0 || d != days[i-1] {
			days[n] = d
			n++
		} else {
			rest = append(rest, d)
		}
	}
	return days[:n], rest
}

// writeWeeks writes sorted distinct departure days as few records as a
// greedy pass finds: consecutive weeks with the same weekday pattern form a
// weekly record, weeks two apart with the same pattern a fortnightly one.
// Each record covers exactly its days, so re-reading reproduces them.
func (w *Writer) writeWeeks(k *legKey, days []int32) error {
	weeks := w.weeks[:0]
	for _, d32 := range days {
		d := int(d32)
		wd := ssimWeekday(d) - 1
		mon := d - wd
		if n := len(weeks); n > 0 && weeks[n-1].monday == mon {
			weeks[n-1].mask |= 1 << wd
			weeks[n-1].last = d
			continue
		}
		weeks = append(weeks, week{monday: mon, mask: 1 << wd, first: d, last: d})
	}
	w.weeks = weeks
	for i := 0; i < len(weeks); {
		j, step := i, 0
		if i+1 < len(weeks) && weeks[i+1].mask == weeks[i].mask {
			if gap := weeks[i+1].monday - weeks[i].monday; gap == 7 || gap == 14 {
				step = gap
			}
		}
		for step > 0 && j+1 < len(weeks) && weeks[j+1].mask == weeks[i].mask && weeks[j+1].monday == weeks[j].monday+step {
			j++
		}
		if err := w.flightLeg(k, weeks[i].first, weeks[j].last, weeks[i].mask, step == 14); err != nil {
			return err
		}
		i = j + 1
	}
	return nil
}

// blank returns the record buffer cleared to spaces with the record type
// set.
func (w *Writer) blank(typ byte) []byte {
	b := w.rec[:recordLen]
	for i := range b {
		b[i] = ' '
	}
	b[0] = typ
	return b
}

// emit numbers and writes the record in w.rec.
func (w *Writer) emit() {
	if w.err != nil {
		return
	}
	// Serials wrap from 999999 to 000002: 000001 belongs to the header.
	if w.serial++; w.serial > 999999 {
		w.serial = 2
	}
	putSerial(w.rec[194:200], w.serial)
	w.rec[recordLen] = '\n'
	w.write(w.rec[:])
}

func (w *Writer) write(b []byte) {
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("ssim: %w", err)
		return
	}
	w.lines++
}

// pad fills the current block of 5 lines with zero lines.
func (w *Writer) pad() {
	if w.lines%5 == 0 {
		return
	}
	var z [recordLen + 1]byte
	for i := range recordLen {
		z[i] = '0'
	}
	z[recordLen] = '\n'
	for w.lines%5 != 0 && w.err == nil {
		w.write(z[:])
	}
}

func putSerial(b []byte, n int) { putZero(b, n) }

// putZero writes n zero-padded into b.
func putZero(b []byte, n int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
}

// putRight writes n right-justified and blank-padded into b.
func putRight(b []byte, n int) {
	i := len(b) - 1
	for {
		b[i] = byte('0' + n%10)
		n /= 10
		i--
		if n == 0 || i < 0 {
			break
		}
	}
	for ; i >= 0; i-- {
		b[i] = ' '
	}
}
