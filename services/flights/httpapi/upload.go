package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/services/flights"
)

// Imports uploaded over HTTP: POST /api/imports takes an SSIM file and an
// optional rotation file as multipart/form-data, stores them in temporary
// files and starts the same bulk import as `logbook flights import`, in
// the background; GET /api/imports/{id} reports its progress and, when it
// is done, its result with the rejected records. A season takes tens of
// seconds, longer than a request should be held open.

// MaxImportBody bounds an upload. A season written as SSIM weekly
// patterns is a few megabytes; a dated file of a large airline, a few
// hundred.
const MaxImportBody = 512 << 20

// keptImports is how many finished imports are remembered for their
// progress to be read.
const keptImports = 16

// ImportStatus is the answer of GET /api/imports/{id}.
type ImportStatus struct {
	ID    string `json:"id"`
	State string `json:"state"` // reading, importing, done, failed
	// Done and Total count legs submitted to the write model, once the
	// files have been read.
	Done       int             `json:"done"`
	Total      int             `json:"total"`
	Started    time.Time       `json:"started"`
	Error      string          `json:"error,omitempty"`
	Result     *ImportSummary  `json:"result,omitempty"`
	Rejections []RejectedEntry `json:"rejections"`
}

// ImportSummary is an import's result without its rejections (which
// ImportStatus lists).
type ImportSummary struct {
	Records          int     `json:"records"`
	FlightLegRecords int     `json:"flight_leg_records"`
	DatedLegs        int     `json:"dated_legs"`
	Rejected         int     `json:"rejected"`
	Rotations        int     `json:"rotations"`
	LegsImported     int     `json:"legs_imported"`
	Unassigned       int     `json:"unassigned_legs"`
	Seconds          float64 `json:"seconds"`
	Position         uint64  `json:"position"`
}

// RejectedEntry is a rejected record: its line in the SSIM file (or, for
// a reason starting "rotations:", in the rotation file).
type RejectedEntry struct {
	Line   int    `json:"line"`
	Record string `json:"record"`
	Reason string `json:"reason"`
}

// maxListedRejections bounds the rejections an answer lists; the count
// is in the result.
const maxListedRejections = 1000

// maxRunningImports bounds the imports one node runs at once: each holds
// its schedule's legs in memory (up to flights.DefaultMaxImportLegs).
const maxRunningImports = 2

// imports holds the upload jobs of one handler.
type imports struct {
	mu      sync.Mutex
	jobs    map[string]*ImportStatus
	ids     []string // in start order, for forgetting the oldest
	running int      // slots taken (acquire), at most maxRunningImports
}

// acquire takes a slot for an import, or reports that all are taken.
func (im *imports) acquire() bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.running >= maxRunningImports {
		return false
	}
	im.running++
	return true
}

// release gives a slot back.
func (im *imports) release() {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.running--
}

func (im *imports) start() *ImportStatus {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.jobs == nil {
		im.jobs = map[string]*ImportStatus{}
	}
	st := &ImportStatus{ID: NewLegID(), State: "reading", Started: time.Now().UTC(), Rejections: []RejectedEntry{}}
	im.jobs[st.ID] = st
	im.ids = append(im.ids, st.ID)
	for len(im.ids) > keptImports {
		if old := im.jobs[im.ids[0]]; old.State == "done" || old.State == "failed" {
			delete(im.jobs, im.ids[0])
			im.ids = im.ids[1:]
			continue
		}
		break
	}
	return st
}

// update changes a job under the lock.
func (im *imports) update(st *ImportStatus, f func(*ImportStatus)) {
	im.mu.Lock()
	defer im.mu.Unlock()
	f(st)
}

func (im *imports) get(id string) (ImportStatus, bool) {
	im.mu.Lock()
	defer im.mu.Unlock()
	st, ok := im.jobs[id]
	if !ok {
		return ImportStatus{}, false
	}
	return *st, true
}

// upload saves the multipart parts "ssim" and "rotations" to temporary
// files and starts the import.
func (s *API) upload(im *imports) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			return &httpkit.Error{Status: http.StatusUnsupportedMediaType, Detail: "an import is multipart/form-data with a file part \"ssim\" and optionally \"rotations\""}
		}
		if !im.acquire() {
			w.Header().Set("Retry-After", "10")
			return &httpkit.Error{Status: http.StatusTooManyRequests, Detail: fmt.Sprintf("%d imports are running on this node, the most it runs at once: try again when one is done", maxRunningImports)}
		}
		started := false
		defer func() {
			if !started {
				im.release()
			}
		}()
		r.Body = http.MaxBytesReader(w, r.Body, MaxImportBody)
		mr, err := r.MultipartReader()
		if err != nil {
			return httpkit.BadRequest("malformed multipart body: %v", err)
		}
		files := map[string]*os.File{}
		defer func() {
			// On an error before the import starts, the files go here;
			// once it has started, it owns them.
			for _, f := range files {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		strict := false
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					return &httpkit.Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf("an upload is at most %d MiB", MaxImportBody>>20)}
				}
				return httpkit.BadRequest("malformed multipart body: %v", err)
			}
			name := part.FormName()
			switch name {
			case "ssim", "rotations":
				if files[name] != nil {
					return httpkit.BadRequest("part %q given twice", name)
				}
				f, err := os.CreateTemp("", "logbook-import-*")
				if err != nil {
					return err
				}
				files[name] = f
				if _, err := io.Copy(f, part); err != nil {
					var tooBig *http.MaxBytesError
					if errors.As(err, &tooBig) {
						return &httpkit.Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf("an upload is at most %d MiB", MaxImportBody>>20)}
					}
					return httpkit.BadRequest("reading part %q: %v", name, err)
				}
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return err
				}
			case "strict":
				b, _ := io.ReadAll(io.LimitReader(part, 16))
				strict, _ = strconv.ParseBool(string(b))
			default:
				return httpkit.BadRequest("unknown part %q: want \"ssim\", \"rotations\" or \"strict\"", name)
			}
		}
		sched := files["ssim"]
		if sched == nil {
			return httpkit.BadRequest("the file part \"ssim\" is required")
		}
		rots := files["rotations"]
		files = nil // the import closes and removes them
		st := im.start()
		started = true // runImport releases the slot
		go s.runImport(im, st, sched, rots, strict)
		w.Header().Set("Location", "/api/imports/"+st.ID)
		snap, _ := im.get(st.ID)
		return httpkit.WriteJSON(w, http.StatusAccepted, snap)
	}
}

func (s *API) runImport(im *imports, st *ImportStatus, sched, rots *os.File, strict bool) {
	defer im.release()
	defer func() {
		// A bug in the import fails this import, not the node.
		if p := recover(); p != nil {
			im.update(st, func(st *ImportStatus) { st.State, st.Error = "failed", fmt.Sprintf("internal error: %v", p) })
		}
	}()
	defer func() {
		for _, f := range []*os.File{sched, rots} {
			if f != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}
	}()
	var rr io.Reader
	if rots != nil {
		rr = rots
	}
	ctx := s.life
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := flights.Import(ctx, s.Service, sched, rr, flights.ImportOptions{Strict: strict, Progress: func(done, total int) {
		im.update(st, func(st *ImportStatus) { st.State, st.Done, st.Total = "importing", done, total })
	}})
	im.update(st, func(st *ImportStatus) {
		st.Result = &ImportSummary{
			Records: res.Records, FlightLegRecords: res.FlightLegRecords, DatedLegs: res.DatedLegs,
			Rejected: len(res.Rejections), Rotations: res.Rotations, LegsImported: res.LegsImported,
			Unassigned: res.Unassigned, Seconds: res.Seconds, Position: res.Position,
		}
		for i, rj := range res.Rejections {
			if i == maxListedRejections {
				break
			}
			st.Rejections = append(st.Rejections, RejectedEntry{rj.Line, rj.Record, rj.Reason})
		}
		st.Done = res.LegsImported
		if err != nil {
			st.State, st.Error = "failed", err.Error()
			return
		}
		st.State = "done"
		if st.Total == 0 {
			st.Total = res.LegsImported
		}
	})
}

func (s *API) importStatus(im *imports) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		st, ok := im.get(r.PathValue("id"))
		if !ok {
			return fmt.Errorf("import %s (only the last %d are kept): %w", r.PathValue("id"), keptImports, flights.ErrNotFound)
		}
		w.Header().Set("Cache-Control", "no-store")
		return httpkit.WriteJSON(w, http.StatusOK, st)
	}
}
