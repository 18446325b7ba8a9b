package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/services/flights"
)

// boardSchedule makes three rotations: R1 (LH, FRA–AMS–FRA–…), R2 (LH,
// MUC–JFK–MUC), R3 (UA, ORD–EWR) and assigns D-AIAA to R1.
func boardSchedule(t *testing.T, svc *flights.Service) uint64 {
	t.Helper()
	ctx := context.Background()
	var pos uint64
	run := func(res aggregate.Result[flights.RotationEvent], err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		pos = max(pos, res.Position)
	}
	for _, id := range []string{"R1", "R2", "R3"} {
		run(svc.Rotations.Execute(ctx, id, flights.CreateRotation{}))
	}
	// R1: two legs a day for five days; day 3's second leg leaves from
	// the wrong airport (a continuity violation).
	var r1 []flights.Leg
	for d := range 5 {
		from := "AMS"
		if d == 2 {
			from = "CDG"
		}
		r1 = append(r1, leg(fmt.Sprintf("a%d", d), "LH", 100+2*d, "FRA", "AMS", d*1440+360, 70),
			leg(fmt.Sprintf("b%d", d), "LH", 101+2*d, from, "FRA", d*1440+480, 70))
	}
	run(svc.Rotations.Execute(ctx, "R1", flights.AddLegs{Legs: r1}))
	run(svc.Rotations.Execute(ctx, "R2", flights.AddLegs{Legs: []flights.Leg{
		leg("j1", "LH", 410, "MUC", "JFK", 600, 540), leg("j2", "LH", 411, "JFK", "MUC", 1440+600, 480),
	}}))
	run(svc.Rotations.Execute(ctx, "R3", flights.AddLegs{Legs: []flights.Leg{leg("u1", "UA", 500, "ORD", "EWR", 3*1440+600, 120)}}))
	if _, err := svc.Airplanes.Execute(ctx, "D-AIAA", flights.CreateAirplane{Type: "320"}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Airplanes.Execute(ctx, "D-AIAA", flights.AssignRotation{Rotation: "R1"})
	if err != nil {
		t.Fatal(err)
	}
	return max(pos, res.Position)
}

func lanesOf(t *testing.T, r apiResp) []string {
	t.Helper()
	var out []string
	for _, l := range r.body["lanes"].([]any) {
		out = append(out, l.(map[string]any)["rotation"].(string))
	}
	return out
}

func TestBoardLanes(t *testing.T) {
	srv, svc := newAPI(t)
	pos := boardSchedule(t, svc)
	q := func(params string) []string {
		t.Helper()
		return lanesOf(t, expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/board/lanes?min_position=%d&%s", pos, params), ""), 200))
	}
	for _, c := range []struct {
		params string
		want   string
	}{
		{"", "R1 R2 R3"},
		{"airline=UA", "R3"},
		{"airline=lh", "R1 R2"}, // codes are case-insensitive
		{"airport=JFK", "R2"},
		{"airport=CDG", "R1"},
		{"airplane=d-aia", "R1"},
		{"airplane=nothing", ""},
		{"rotation=r2", "R2"},
		// In the afternoon of day 2 only R2's JFK–MUC leg flies (R1's
		// day ends at 09:10); R3 flies on day 4 only.
		{"from=2026-03-30T12:00:00Z&to=2026-03-31", "R2"},
		{"from=2026-04-01&to=2026-04-02", "R1 R3"},
		{"from=2026-04-01&to=2026-04-02&airport=AMS", "R1"},
		{"from=2026-05-01&to=2026-05-02", ""},
	} {
		if got := strings.Join(q(c.params), " "); got != c.want {
			t.Errorf("lanes?%s = %q, want %q", c.params, got, c.want)
		}
	}
	r := expect(t, call(t, srv, viewerToken, "GET", "/api/board/lanes", ""), 200)
	first := r.body["lanes"].([]any)[0].(map[string]any)
	if first["airplane"] != "D-AIAA" || first["airplane_type"] != "320" || first["legs"] != float64(10) || first["violations"] != float64(1) {
		t.Fatalf("lane R1 = %v, want airplane D-AIAA (320), 10 legs, 1 violation", first)
	}
	if r.body["from"] != "2026-03-29T06:00:00Z" || r.body["to"] != "2026-04-02T09:10:00Z" {
		t.Fatalf("extent %v – %v", r.body["from"], r.body["to"])
	}
	expect(t, call(t, srv, viewerToken, "GET", "/api/board/lanes?from=soon", ""), 400)
	expect(t, call(t, srv, viewerToken, "GET", "/api/board/lanes?from=2026-04-02&to=2026-04-01", ""), 400)
}

func TestBoardLegs(t *testing.T) {
	srv, svc := newAPI(t)
	pos := boardSchedule(t, svc)
	get := func(params string) map[string]any {
		t.Helper()
		r := expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/board/legs?min_position=%d&%s", pos, params), ""), 200)
		lanes := map[string]any{}
		for _, l := range r.body["lanes"].([]any) {
			lanes[l.(map[string]any)["rotation"].(string)] = l
		}
		return lanes
	}
	ids := func(lane any, field string) string {
		var out []string
		for _, x := range lane.(map[string]any)[field].([]any) {
			out = append(out, x.(map[string]any)["id"].(string))
		}
		return strings.Join(out, " ")
	}
	// Day 3 (2026-03-31) 07:30 to day 4 07:00: R1's b2 (08:00, the
	// continuity violation's second leg) and a3 (day 4, 06:00–07:10,
	// overlapping the end), not a2 (day 3, 06:00–07:10); R2 has nothing
	// then; R3 was not asked for.
	lanes := get("rotations=R1,R2,nope&from=2026-03-31T07:30:00Z&to=2026-04-01T07:00:00Z")
	if len(lanes) != 2 || lanes["nope"] != nil {
		t.Fatalf("lanes %v, want R1 and R2 (an unknown rotation is left out)", lanes)
	}
	if got := ids(lanes["R1"], "legs"); got != "b2 a3" {
		t.Fatalf("R1 legs %q, want b2 a3", got)
	}
	if got := ids(lanes["R1"], "violations"); got != "continuity:R1:a2:b2" {
		t.Fatalf("R1 violations %q", got)
	}
	if lanes["R1"].(map[string]any)["airplane"] != "D-AIAA" {
		t.Fatalf("R1 lane has no airplane: %v", lanes["R1"])
	}
	if got := ids(lanes["R2"], "legs"); got != "" {
		t.Fatalf("R2 legs %q, want none", got)
	}
	// A leg that started before the window and ends in it is in it.
	lanes = get("rotations=R2&from=2026-03-29T12:00:00Z&to=2026-03-29T13:00:00Z")
	if got := ids(lanes["R2"], "legs"); got != "j1" {
		t.Fatalf("R2 legs %q, want j1 (in the air at noon)", got)
	}
	// A move shows at its new time once the view has it.
	res, err := svc.Rotations.Execute(context.Background(), "R1", flights.MoveLeg{LegID: "a0", Departure: base.Add(30 * time.Minute), Arrival: base.Add(100 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	pos = res.Position
	lanes = get("rotations=R1&from=2026-03-29T00:00:00Z&to=2026-03-29T02:00:00Z")
	if got := ids(lanes["R1"], "legs"); got != "a0" {
		t.Fatalf("after the move R1 legs %q, want a0", got)
	}
	for _, bad := range []string{
		"rotations=R1",                               // no window
		"from=2026-03-29&to=2026-03-30",              // no rotations
		"rotations=R1&from=2026-03-29&to=2026-06-29", // more than 62 days
		"rotations=R1&from=2026-03-29&to=2026-03-29", // empty
		"rotations=" + strings.Repeat("R,", maxWindowLanes) + "R&from=2026-03-29&to=2026-03-30",
	} {
		expect(t, call(t, srv, viewerToken, "GET", "/api/board/legs?"+bad, ""), 400)
	}
}

// A rotation id may contain a comma: the rotations parameter, repeated,
// takes each value as one id; given once, it is a comma-separated list.
func TestBoardLegsCommaInRotationID(t *testing.T) {
	srv, svc := newAPI(t)
	pos := boardSchedule(t, svc)
	ctx := context.Background()
	for _, id := range []string{"X,1", "X"} {
		if _, err := svc.Rotations.Execute(ctx, id, flights.CreateRotation{}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := svc.Rotations.Execute(ctx, "X,1", flights.AddLegs{Legs: []flights.Leg{leg("c1", "LH", 900, "FRA", "CPH", 720, 90)}})
	if err != nil {
		t.Fatal(err)
	}
	pos = max(pos, res.Position)
	lanes := func(params string) string {
		t.Helper()
		r := expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/board/legs?from=2026-03-29&to=2026-03-30&min_position=%d&%s", pos, params), ""), 200)
		var out []string
		for _, l := range r.body["lanes"].([]any) {
			lane := l.(map[string]any)
			out = append(out, fmt.Sprintf("%s:%d", lane["rotation"], len(lane["legs"].([]any))))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct{ params, want string }{
		{"rotations=X%2C1&rotations=R3", "X,1:1 R3:0"},
		{"rotations=R3&rotations=X,1", "R3:0 X,1:1"}, // the comma unescaped is the same
		{"rotations=X%2C1&rotations=", "X,1:1"},      // one id with a comma: an empty value makes it repeated
		{"rotations=&rotations=X%2C1&rotations=", "X,1:1"},
		{"rotations=X,1&rotations=X", "X,1:1 X:0"},
		// Given once, the parameter is the comma-separated list it always was.
		{"rotations=X%2C1", "X:0"},
		{"rotations=R3,X,1", "R3:0 X:0"},
		{"rotations=R1", "R1:2"},
	} {
		if got := lanes(c.params); got != c.want {
			t.Errorf("legs?%s: lanes %q, want %q", c.params, got, c.want)
		}
	}
	for _, bad := range []string{
		"rotations=&rotations=", // no id
		"rotations=",            // no id
		"rotations=R1&rotations=" + strings.Repeat("&rotations=R%2C1", maxWindowLanes), // one too many
		"rotations=" + strings.Repeat("R,", maxWindowLanes) + "R",                      // one too many
	} {
		r := expect(t, call(t, srv, viewerToken, "GET", "/api/board/legs?from=2026-03-29&to=2026-03-30&"+bad, ""), 400)
		if !strings.Contains(r.raw, "rotations") {
			t.Errorf("legs?%.60s: %s, want a problem naming rotations", bad, r.raw)
		}
	}
	// At the limit, repeated, is fine.
	expect(t, call(t, srv, viewerToken, "GET", "/api/board/legs?from=2026-03-29&to=2026-03-30"+strings.Repeat("&rotations=R%2C1", maxWindowLanes), ""), 200)
}

func TestBoardMetaAndSession(t *testing.T) {
	srv, svc := newAPI(t)
	pos := boardSchedule(t, svc)
	r := expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/board/meta?min_position=%d", pos), ""), 200)
	var m flights.BoardMeta
	if err := json.Unmarshal([]byte(r.raw), &m); err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.Airlines, " ") != "LH UA" || strings.Join(m.Airports, " ") != "AMS CDG EWR FRA JFK MUC ORD" {
		t.Fatalf("airlines %v, airports %v", m.Airlines, m.Airports)
	}
	if len(m.Airplanes) != 1 || m.Airplanes[0].Registration != "D-AIAA" || m.Airplanes[0].Rotation != "R1" {
		t.Fatalf("airplanes %+v", m.Airplanes)
	}
	if m.Stats != (flights.Stats{Legs: 13, Rotations: 3, Airplanes: 1}) || !m.From.Equal(base.Add(360*time.Minute)) {
		t.Fatalf("stats %+v, from %v", m.Stats, m.From)
	}
	r = expect(t, call(t, srv, viewerToken, "GET", "/api/session", ""), 200)
	if r.body["role"] != "viewer" || r.body["can_write"] != false {
		t.Fatalf("viewer session %v", r.body)
	}
	r = expect(t, call(t, srv, planner(), "GET", "/api/session", ""), 200)
	if r.body["role"] != "planner" || r.body["can_write"] != true {
		t.Fatalf("planner session %v", r.body)
	}
	expect(t, call(t, srv, "", "GET", "/api/session", ""), 401)
	expect(t, call(t, srv, "wrong-token-x", "GET", "/api/board/lanes", ""), 401)
}

// sseEvent is one server-sent event.
type sseEvent struct {
	event, id, data string
}

func readEvents(t *testing.T, body io.Reader, out chan<- sseEvent) {
	sc := bufio.NewScanner(body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.event != "" {
				out <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
	close(out)
}

func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10 s")
	}
	return sseEvent{}
}

func TestLive(t *testing.T) {
	srv, svc := newAPI(t)
	pos := boardSchedule(t, svc)
	req, _ := http.NewRequest("GET", srv.URL+"/api/live", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := make(chan sseEvent, 16)
	go readEvents(t, res.Body, events)
	hello := next(t, events)
	if hello.event != "hello" || hello.id != fmt.Sprint(pos) {
		t.Fatalf("first event %+v, want hello at the head %d", hello, pos)
	}
	// A planner's move of a leg of R1 and a new airplane assigned to R2,
	// made within the coalescing window, arrive as one change.
	p := planner()
	expect(t, call(t, srv, p, "PATCH", "/api/rotations/R1/legs/a1", `{"departure":"2026-03-30T05:00:00Z","arrival":"2026-03-30T06:10:00Z"}`), 200)
	expect(t, call(t, srv, p, "POST", "/api/airplanes", `{"registration":"D-AIBB","type":"359"}`), 201)
	last := expect(t, call(t, srv, p, "PUT", "/api/airplanes/D-AIBB/rotation", `{"rotation":"R2"}`), 200)
	var c Change
	for c.Position < uint64(last.body["position"].(float64)) {
		ev := next(t, events)
		if ev.event != "change" {
			t.Fatalf("event %+v, want a change", ev)
		}
		var more Change
		if err := json.Unmarshal([]byte(ev.data), &more); err != nil {
			t.Fatal(err)
		}
		if ev.id != fmt.Sprint(more.Position) {
			t.Fatalf("event id %s, position %d", ev.id, more.Position)
		}
		c.Position = more.Position
		c.Rotations = append(c.Rotations, more.Rotations...)
		c.Airplanes = append(c.Airplanes, more.Airplanes...)
		c.Lanes = c.Lanes || more.Lanes
	}
	if strings.Join(c.Rotations, " ") != "R1" || strings.Join(c.Airplanes, " ") != "D-AIBB" || !c.Lanes {
		t.Fatalf("changes %+v, want rotation R1 and airplane D-AIBB with lanes changed", c)
	}
	// Reading the board at the change's position shows the move.
	r := expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/board/legs?rotations=R1&from=2026-03-30T04:00:00Z&to=2026-03-30T07:00:00Z&min_position=%d", c.Position), ""), 200)
	if !strings.Contains(r.raw, `"id":"a1","airline":"LH","number":102,"origin":"FRA","destination":"AMS","day_of_origin":"2026-03-30","departure":"2026-03-30T05:00:00Z"`) {
		t.Fatalf("the board does not show the move: %s", r.raw)
	}
}

// A live stream ends when the service's context does, so that a server
// shutting down does not wait for its clients.
func TestLiveEndsWithService(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, _ := newAPIUntil(t, ctx)
	req, _ := http.NewRequest("GET", srv.URL+"/api/live", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan sseEvent, 4)
	go readEvents(t, res.Body, events)
	if ev := next(t, events); ev.event != "hello" {
		t.Fatalf("first event %+v", ev)
	}
	cancel()
	select {
	case _, ok := <-events:
		if ok {
			t.Fatal("an event after the service's end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open 5 s after the service ended")
	}
}

func upload(t *testing.T, url, token string, parts map[string][]byte) apiResp {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, name := range []string{"ssim", "rotations"} {
		if b, ok := parts[name]; ok {
			w, _ := mw.CreateFormFile(name, name+".txt")
			w.Write(b)
		}
	}
	mw.Close()
	req, _ := http.NewRequest("POST", url+"/api/imports", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := apiResp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func TestUploadImport(t *testing.T) {
	srv, svc := newAPI(t)
	g, err := flights.GenerateSchedule(flights.GenerateOptions{Weeks: 1, FlightsPerWeek: 300, Violations: 0.02, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var sched, rots bytes.Buffer
	if err := flights.WriteSchedule(&sched, &rots, g.Airline, g.Rotations); err != nil {
		t.Fatal(err)
	}
	// One rotation line names a leg the schedule does not have: rejected.
	rotFile := rots.String() + "LH-R9999,LH,9999,,2026-03-29,FRA\n"
	parts := map[string][]byte{"ssim": sched.Bytes(), "rotations": []byte(rotFile)}

	expect(t, upload(t, srv.URL, viewerToken, parts), 403)
	expect(t, upload(t, srv.URL, planner(), map[string][]byte{"rotations": []byte(rotFile)}), 400)
	expect(t, call(t, srv, planner(), "POST", "/api/imports", `{"ssim":"…"}`), 415)

	r := expect(t, upload(t, srv.URL, planner(), parts), 202)
	loc := r.header.Get("Location")
	if !strings.HasPrefix(loc, "/api/imports/") {
		t.Fatalf("Location %q", loc)
	}
	var st ImportStatus
	for deadline := time.Now().Add(30 * time.Second); ; {
		r = expect(t, call(t, srv, viewerToken, "GET", loc, ""), 200)
		st = ImportStatus{}
		if err := json.Unmarshal([]byte(r.raw), &st); err != nil {
			t.Fatal(err)
		}
		if st.State == "done" || st.State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("import still %s after 30 s", st.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.State != "done" || st.Result == nil || st.Result.LegsImported != g.Injected.Legs || st.Done != st.Total || st.Total != g.Injected.Legs {
		t.Fatalf("import %+v, want %d legs imported", st, g.Injected.Legs)
	}
	if st.Result.Rejected != 1 || len(st.Rejections) != 1 || !strings.Contains(st.Rejections[0].Reason, "no dated leg") ||
		st.Rejections[0].Line != strings.Count(rotFile, "\n") {
		t.Fatalf("rejections %+v (result %+v), want the one bad rotation line", st.Rejections, st.Result)
	}
	v := waitPos(t, svc, st.Result.Position)
	if c, _ := v.Counts(); c.Continuity != g.Injected.Continuity || c.DuplicateDesignator != g.Injected.DuplicateDesignator {
		t.Fatalf("view counts %+v, generator injected %+v", c, g.Injected)
	}
	expect(t, call(t, srv, viewerToken, "GET", "/api/imports/nope", ""), 404)
}
