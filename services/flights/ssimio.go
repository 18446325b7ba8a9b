package flights

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/services/flights/ssim"
)

// Conversions between the schedule and SSIM, the bulk importer and the
// exporter.

func toDated(l *Leg) (ssim.DatedLeg, error) {
	doo, err := ssim.ParseDate(l.DayOfOrigin)
	if err != nil {
		return ssim.DatedLeg{}, fmt.Errorf("leg %s: %w", l.ID, err)
	}
	typ := l.AircraftType
	if typ == "" {
		typ = "320"
	}
	return ssim.DatedLeg{
		Airline: l.Airline, Number: l.Number, Suffix: l.Suffix, IVI: 1, LegSeq: 1, ServiceType: 'J',
		Origin: l.Origin, Destination: l.Destination, Departure: l.Departure, Arrival: l.Arrival,
		DayOfOrigin: doo, AircraftType: typ,
	}, nil
}

func fromDated(d *ssim.DatedLeg, id string) Leg {
	return Leg{
		ID: id, Airline: d.Airline, Number: d.Number, Suffix: d.Suffix,
		Origin: d.Origin, Destination: d.Destination, DayOfOrigin: d.DayOfOrigin.String(),
		Departure: d.Departure.UTC(), Arrival: d.Arrival.UTC(), AircraftType: d.AircraftType,
	}
}

// WriteSchedule writes rotations as an SSIM file (weekly patterns) and a
// rotation file that puts every leg back into its rotation. A designator
// that several legs share appears once per leg in the rotation file, in
// the order the legs appear in the SSIM file's expansion (see docs/ssim.md).
func WriteSchedule(schedule, rotations io.Writer, airline string, rots []RotationLegs) error {
	var from, to time.Time
	type placed struct {
		leg ssim.DatedLeg
		rot string
	}
	var all []placed
	for _, r := range rots {
		for i := range r.Legs {
			d, err := toDated(&r.Legs[i])
			if err != nil {
				return err
			}
			all = append(all, placed{d, r.ID})
			if from.IsZero() || d.Departure.Before(from) {
				from = d.Departure
			}
			if d.Departure.After(to) {
				to = d.Departure
			}
		}
	}
	w := ssim.NewCompactWriter(schedule, ssim.CarrierInfo{
		Airline: airline, Season: seasonOf(from), ValidFrom: ssim.DateOf(from).AddDays(-1), ValidTo: ssim.DateOf(to).AddDays(1),
		Created: ssim.DateOf(time.Now()), Title: "logbook generated schedule",
	})
	for i := range all {
		if err := w.Write(all[i].leg); err != nil {
			return fmt.Errorf("ssim: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	// The rotation file lists legs in the order a reader of the SSIM file
	// meets them, so that shared designators are matched in that order.
	sort.SliceStable(all, func(i, j int) bool { return lessDated(&all[i].leg, &all[j].leg) })
	rows := make([]ssim.RotationAssignment, len(all))
	for i, p := range all {
		rows[i] = ssim.RotationAssignment{Rotation: p.rot, Leg: p.leg.Designator()}
	}
	return ssim.WriteRotations(rotations, rows)
}

// lessDated orders dated legs the way the import matches legs that share
// a designator with the lines of the rotation file: by departure, then
// designator, destination and arrival. Two legs with one designator may
// leave at the same minute for different places; ties must not be left to
// chance, or they could swap rotations.
func lessDated(a, b *ssim.DatedLeg) bool {
	if !a.Departure.Equal(b.Departure) {
		return a.Departure.Before(b.Departure)
	}
	if da, db := a.Designator().String(), b.Designator().String(); da != db {
		return da < db
	}
	if a.Destination != b.Destination {
		return a.Destination < b.Destination
	}
	return a.Arrival.Before(b.Arrival)
}

func seasonOf(t time.Time) string {
	y := t.Year() % 100
	if t.Month() >= time.April && t.Month() < time.November {
		return fmt.Sprintf("S%02d", y)
	}
	return fmt.Sprintf("W%02d", y)
}

// ImportOptions tune Import.
type ImportOptions struct {
	Strict   bool                  // stop at the first rejected record
	Progress func(done, total int) // legs submitted so far, of total; may be nil
	Workers  int                   // concurrent commands (default 64)
	// MaxLegs bounds the dated legs a schedule may expand into (default
	// DefaultMaxImportLegs): one SSIM record can stand for a flight every
	// day for a century, and an import holds its legs in memory.
	MaxLegs int
}

// DefaultMaxImportLegs is the most dated legs one import may expand into
// unless ImportOptions.MaxLegs says otherwise: a large airline's season
// is some 600,000, and every leg is held in memory while the legs are
// sorted and chained (docs/benchmarks.md, "Figures behind choices in the
// code").
const DefaultMaxImportLegs = 1_000_000

// ErrTooManyLegs refuses a schedule that expands beyond its limit of
// dated legs; nothing of it is written.
var ErrTooManyLegs = errors.New("the schedule expands into too many dated legs")

// ImportResult is what `flights import --json` prints.
type ImportResult struct {
	Records          int              `json:"records"`
	FlightLegRecords int              `json:"flight_leg_records"`
	DatedLegs        int              `json:"dated_legs"`
	Rejected         int              `json:"rejected"`
	Rotations        int              `json:"rotations"`
	LegsImported     int              `json:"legs_imported"`
	Unassigned       int              `json:"unassigned_legs"`
	Seconds          float64          `json:"seconds"`
	Rejections       []ssim.Rejection `json:"rejections"`
	Position         uint64           `json:"position"`
	ssimStats        ssim.Stats
}

// chunk bounds the legs of one AddLegs command (and so of one event).
const chunk = 500

// Import bulk-loads an SSIM file, with a rotation file or without one
// (then legs are chained by their onward-flight fields). It goes straight
// to the write model: one CreateRotation and a few AddLegs commands per
// rotation, many in flight at once — not command by command through HTTP.
// Every command carries an idempotency key derived from the file's
// content, so importing the same files again changes nothing.
func Import(ctx context.Context, svc *Service, schedule io.Reader, rotations io.Reader, opts ImportOptions) (ImportResult, error) {
	start := time.Now()
	im := &importer{svc: svc, opts: opts}
	if err := im.readLegs(schedule); err != nil {
		im.res.Rejected = len(im.res.Rejections)
		return im.res, fmt.Errorf("import: %w", err)
	}
	im.numberLegs()
	var err error
	if rotations != nil {
		err = im.groupByRotationFile(rotations)
	} else {
		im.groupByOnward()
	}
	if err != nil {
		return im.res, fmt.Errorf("import: %w", err)
	}
	jobs, total, err := im.commands()
	if err != nil {
		return im.res, fmt.Errorf("import: %w", err)
	}
	err = im.run(ctx, jobs, total)
	res := im.res
	res.Rejected = len(res.Rejections)
	res.Seconds = time.Since(start).Seconds()
	sort.SliceStable(res.Rejections, func(i, j int) bool { return res.Rejections[i].Line < res.Rejections[j].Line })
	if res.Rejections == nil {
		res.Rejections = []ssim.Rejection{}
	}
	return res, err
}

// importer is one Import: the dated legs read, their ids, and the legs of
// each rotation.
type importer struct {
	svc   *Service
	opts  ImportOptions
	res   ImportResult
	rejMu sync.Mutex

	legs []ssim.DatedLeg
	// ids are the legs' ids: the designator, numbered when several legs
	// share it; byDesignator the indexes of the legs of each.
	ids          []string
	byDesignator map[ssim.Designator][]int
	// groups holds the indexes of the legs of each rotation, order the
	// rotations in the order they were met.
	groups map[string][]int
	order  []string
}

func (im *importer) reject(r ssim.Rejection) {
	im.rejMu.Lock()
	im.res.Rejections = append(im.res.Rejections, r)
	im.rejMu.Unlock()
}

// readLegs reads the schedule's dated legs, at most MaxLegs, sorted in
// the order duplicates are matched in (see WriteSchedule).
func (im *importer) readLegs(schedule io.Reader) error {
	maxLegs := im.opts.MaxLegs
	if maxLegs <= 0 {
		maxLegs = DefaultMaxImportLegs
	}
	st, err := ssim.Read(schedule, ssim.Options{Strict: im.opts.Strict, OnReject: im.reject}, func(l ssim.DatedLeg) error {
		if len(im.legs) == maxLegs {
			return fmt.Errorf("%w: more than %d (split the file, or raise the limit)", ErrTooManyLegs, maxLegs)
		}
		im.legs = append(im.legs, l)
		return nil
	})
	im.res.ssimStats = st
	im.res.Records, im.res.FlightLegRecords, im.res.DatedLegs = st.Records, st.FlightLegRecords, st.DatedLegs
	if err != nil {
		return err
	}
	legs := im.legs
	sort.SliceStable(legs, func(i, j int) bool { return lessDated(&legs[i], &legs[j]) })
	return nil
}

// numberLegs gives each leg its id: the designator, numbered when several
// legs share it.
func (im *importer) numberLegs() {
	im.ids = make([]string, len(im.legs))
	im.byDesignator = make(map[ssim.Designator][]int, len(im.legs))
	for i := range im.legs {
		d := im.legs[i].Designator()
		im.byDesignator[d] = append(im.byDesignator[d], i)
		im.ids[i] = GeneratedLegID(Designator{d.Airline, d.Number, d.Suffix, d.Origin, d.DayOfOrigin.String()}, len(im.byDesignator[d]))
	}
	im.groups = map[string][]int{}
}

// setGroup makes legs the rotation rid.
func (im *importer) setGroup(rid string, legs []int) {
	im.groups[rid] = legs
	im.order = append(im.order, rid)
}

// groupByRotationFile groups the legs as the rotation file says; legs it
// does not mention fly alone.
func (im *importer) groupByRotationFile(rotations io.Reader) error {
	rows, rejs, err := ssim.ReadRotations(rotations)
	for _, r := range rejs {
		im.reject(r)
	}
	if err != nil {
		return err
	}
	if im.opts.Strict && len(rejs) > 0 {
		return rejs[0]
	}
	used := make(map[ssim.Designator]int)
	assigned := make([]bool, len(im.legs))
	for _, row := range rows {
		cands := im.byDesignator[row.Leg]
		n := used[row.Leg]
		if n >= len(cands) {
			r := ssim.Rejection{Line: row.Line, Record: row.Leg.String(), Reason: fmt.Sprintf("rotations: no dated leg %v in the schedule", row.Leg)}
			if n > 0 {
				r.Reason = fmt.Sprintf("rotations: leg %v is listed %d times, the schedule has it %d times", row.Leg, n+1, len(cands))
			}
			if im.opts.Strict {
				return r
			}
			im.reject(r)
			continue
		}
		used[row.Leg] = n + 1
		i := cands[n]
		assigned[i] = true
		if _, ok := im.groups[row.Rotation]; !ok {
			im.order = append(im.order, row.Rotation)
		}
		im.groups[row.Rotation] = append(im.groups[row.Rotation], i)
	}
	// Legs the rotation file does not mention fly alone.
	for i := range im.legs {
		if !assigned[i] {
			im.setGroup("U-"+im.ids[i], []int{i})
			im.res.Unassigned++
		}
	}
	return nil
}

// groupByOnward chains the legs by their onward-flight fields.
func (im *importer) groupByOnward() {
	for _, chain := range ssim.ChainByOnward(im.legs) {
		im.setGroup("C-"+im.ids[chain[0]], chain)
	}
}

// commands turns each rotation's legs into its AddLegs commands, at most
// chunk legs each, and returns them with the count of legs. Within a
// rotation, a leg that overlaps an earlier one is refused here, with its
// record's line, rather than failing the whole rotation's command.
func (im *importer) commands() ([]importJob, int, error) {
	legs, ids := im.legs, im.ids
	var jobs []importJob
	total := 0
	for _, rid := range im.order {
		idx := im.groups[rid]
		sort.SliceStable(idx, func(a, b int) bool { return legs[idx[a]].Departure.Before(legs[idx[b]].Departure) })
		var kept []Leg
		for _, i := range idx {
			l := fromDated(&legs[i], ids[i])
			if err := l.Validate(); err != nil {
				im.reject(ssim.Rejection{Line: legs[i].Record, Record: ids[i], Reason: err.Error()})
				continue
			}
			if n := len(kept); n > 0 && overlaps(&kept[n-1], &l) {
				im.reject(ssim.Rejection{Line: legs[i].Record, Record: ids[i], Reason: fmt.Sprintf("overlaps leg %s of rotation %s", kept[n-1].ID, rid)})
				continue
			}
			kept = append(kept, l)
		}
		if im.opts.Strict && len(im.res.Rejections) > 0 {
			return nil, 0, im.res.Rejections[0]
		}
		if len(kept) == 0 {
			continue
		}
		for from := 0; from < len(kept); from += chunk {
			jobs = append(jobs, importJob{rid, kept[from:min(from+chunk, len(kept))]})
		}
		total += len(kept)
		im.res.Rotations++
	}
	return jobs, total, nil
}

// run executes the commands on Workers goroutines and records the legs
// imported and the last position; it returns the first error, or the
// context's.
func (im *importer) run(ctx context.Context, jobs []importJob, total int) error {
	workers := im.opts.Workers
	if workers <= 0 {
		workers = 64
	}
	var (
		next     atomic.Int64
		done     atomic.Int64
		maxPos   atomic.Uint64
		firstErr error
		errMu    sync.Mutex
		wg       sync.WaitGroup
	)
	// A rotation's commands must run in order (create, then its chunks),
	// so a worker takes whole rotations.
	byRot := map[string][]importJob{}
	var rotOrder []string
	for _, j := range jobs {
		if _, ok := byRot[j.rotation]; !ok {
			rotOrder = append(rotOrder, j.rotation)
		}
		byRot[j.rotation] = append(byRot[j.rotation], j)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(rotOrder) || ctx.Err() != nil {
					return
				}
				rid := rotOrder[k]
				err := importRotation(ctx, im.svc, rid, byRot[rid], &maxPos)
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("import rotation %s: %w", rid, err)
					}
					errMu.Unlock()
					return
				}
				n := 0
				for _, j := range byRot[rid] {
					n += len(j.legs)
				}
				d := done.Add(int64(n))
				if im.opts.Progress != nil {
					im.opts.Progress(int(d), total)
				}
			}
		}()
	}
	wg.Wait()
	im.res.LegsImported = int(done.Load())
	im.res.Position = maxPos.Load()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// importJob is one AddLegs command of an import.
type importJob struct {
	rotation string
	legs     []Leg
}

// importRotation creates a rotation and adds its legs, in order.
func importRotation(ctx context.Context, svc *Service, rid string, jobs []importJob, maxPos *atomic.Uint64) error {
	note := func(p uint64) {
		for {
			cur := maxPos.Load()
			if p <= cur || maxPos.CompareAndSwap(cur, p) {
				return
			}
		}
	}
	res, err := svc.Rotations.Execute(ctx, rid, CreateRotation{}, aggregate.WithIdempotencyKey("import:create"))
	if err != nil {
		return err
	}
	note(res.Position)
	for _, j := range jobs {
		key := fmt.Sprintf("import:%s:%s:%d", j.legs[0].ID, j.legs[len(j.legs)-1].ID, len(j.legs))
		res, err := svc.Rotations.Execute(ctx, rid, AddLegs{Legs: j.legs}, aggregate.WithIdempotencyKey(key))
		if err != nil {
			return err
		}
		note(res.Position)
	}
	return nil
}

// Export writes the schedule the validation view holds as SSIM and a
// rotation file.
func Export(v *Validation, schedule, rotations io.Writer) (int, error) {
	rots := v.Rotations()
	if len(rots) == 0 {
		return 0, fmt.Errorf("export: the schedule is empty")
	}
	airline := ""
	n := 0
	for _, r := range rots {
		for _, l := range r.Legs {
			if airline == "" {
				airline = l.Airline
			} else if airline != l.Airline {
				airline = "*" // several carriers
			}
			n++
		}
	}
	if strings.Contains(airline, "*") {
		return 0, fmt.Errorf("export: legs of several airlines; one carrier block per file is supported")
	}
	return n, WriteSchedule(schedule, rotations, airline, rots)
}
