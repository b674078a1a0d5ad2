package check

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The report page: one HTML file whose style and script are inlined and
// whose data is one JSON document, so that it opens anywhere, offline.
var (
	//go:embed report.html.tmpl
	reportPage string
	//go:embed report.js
	reportJS string
	//go:embed report.css
	reportCSS string

	reportTmpl = template.Must(template.New("report").Parse(reportPage))
)

// MaxVisualBytes bounds the porcupine visualizations an HTML report
// carries for one run, together; those past it are named but left out.
const MaxVisualBytes = 3 << 19

// outcomes lists the outcomes in the order the report's data numbers them.
var outcomes = []Outcome{OutOK, OutStale, OutLost, OutUnknown, OutError}

// WriteHTML writes the report of runs (a fenced run, then its control,
// if any) as one self-contained HTML page: per run, a timeline of every
// write to every resource at its token and its time, told apart by
// outcome; each worker's lock holds as bars; the faults across the time
// axis; each violation marked where it happened, with its explanation;
// and porcupine's visualization of each history that is not linearizable.
// The runs sit side by side. Each report must carry its run's Events.
func WriteHTML(w io.Writer, runs ...*Report) error {
	data := htmlData{Generated: time.Now().UTC().Format(time.RFC3339)}
	for _, r := range runs {
		if r != nil {
			data.Runs = append(data.Runs, newHTMLRun(r))
		}
	}
	js, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return reportTmpl.Execute(w, map[string]any{
		"Title":  title(runs),
		"CSS":    template.CSS(reportCSS),
		"JS":     template.JS(reportJS),
		"Data":   template.JS(js), // json.Marshal escapes <, > and &
		"Legend": outcomes,
	})
}

func title(runs []*Report) string {
	for _, r := range runs {
		if r != nil {
			return "fencecheck: seed " + strconv.FormatInt(r.Seed, 10)
		}
	}
	return "fencecheck"
}

// htmlData is the JSON document the page's script draws.
type htmlData struct {
	Generated string    `json:"generated"`
	Runs      []htmlRun `json:"runs"`
}

// htmlRun is one run. Times are tenths of a millisecond since the run's
// first event; indexes refer to the run's lists (Kinds, Keys, Workers,
// Outcomes, FaultKinds, Violations).
type htmlRun struct {
	Name       string   `json:"name"`
	Fenced     bool     `json:"fenced"`
	Seed       int64    `json:"seed"`
	Duration   string   `json:"duration"`
	Span       int64    `json:"span"`
	Kinds      []string `json:"kinds"`
	Keys       []string `json:"keys"`
	Workers    []string `json:"workers"`
	Outcomes   []string `json:"outcomes"`
	FaultKinds []string `json:"faultKinds"`
	FaultHow   []string `json:"faultHow"`
	// Writes are [kind, key, worker, token, call, return (-1: none),
	// outcome, violation (-1: none)].
	Writes [][8]int64 `json:"writes"`
	// Values are the writes' values, in the order of Writes.
	Values []string `json:"values"`
	// Holds are [key, worker, token, from, to, open (1: the worker died
	// holding it, or the run ended; to is its last event)].
	Holds [][6]int64 `json:"holds"`
	// Faults are [kind, worker (-1: an etcd member), from, to].
	Faults [][4]int64 `json:"faults"`
	// Stalls are [key, worker (the next holder), from (its lock), to
	// (its last first accepted write), past (1: past its bound)], with
	// what each is in StallDetail; StallSummary sums them up.
	Stalls       [][5]int64      `json:"stalls"`
	StallDetail  []string        `json:"stallDetail"`
	StallSummary string          `json:"stallSummary"`
	FaultDetail  []string        `json:"faultDetail"`
	Counts       map[string]any  `json:"counts"`
	Violations   []htmlViolation `json:"violations"`
	// Applied are the effects the receivers applied (an effects run's):
	// [receiver (index in Receivers), key, token, time].
	Applied   [][4]int64 `json:"applied"`
	Receivers []string   `json:"receivers"`
}

type htmlViolation struct {
	Resource string `json:"res"`
	Kind     string `json:"kind"`
	Detail   string `json:"detail"`
	// Visual is porcupine's page, "" when there is none or it was left
	// out (Omitted).
	Visual  string `json:"visual,omitempty"`
	Omitted bool   `json:"omitted,omitempty"`
}

// keptVisuals says which of r's violations' visualizations fit
// MaxVisualBytes, in order.
func keptVisuals(r *Report) []bool {
	kept, left := make([]bool, len(r.Violations)), MaxVisualBytes
	for i, v := range r.Violations {
		if n := len(v.Visual); n > 0 && n <= left {
			kept[i], left = true, left-n
		}
	}
	return kept
}

func newHTMLRun(r *Report) htmlRun {
	// Every list is non-nil, so that the page never reads a JSON null.
	h := htmlRun{Name: r.name(), Fenced: r.Fenced, Seed: r.Seed, Duration: r.duration(),
		Kinds: []string{}, Keys: []string{}, Workers: []string{}, FaultKinds: []string{}, FaultHow: []string{},
		Writes: [][8]int64{}, Values: []string{}, Holds: [][6]int64{}, Faults: [][4]int64{}, FaultDetail: []string{}, Stalls: [][5]int64{}, StallDetail: []string{},
		Violations: []htmlViolation{}, Counts: map[string]any{}, Applied: [][4]int64{}, Receivers: Receivers}
	for _, o := range outcomes {
		h.Outcomes = append(h.Outcomes, string(o))
	}
	for _, f := range r.FaultKinds {
		h.FaultKinds = append(h.FaultKinds, string(f.Kind))
		h.FaultHow = append(h.FaultHow, f.How)
	}
	idx := func(list *[]string) func(string) int64 {
		m := map[string]int64{}
		for i, s := range *list {
			m[s] = int64(i)
		}
		return func(s string) int64 {
			if i, ok := m[s]; ok {
				return i
			}
			m[s] = int64(len(*list))
			*list = append(*list, s)
			return m[s]
		}
	}
	for _, k := range r.Workload.or().Kinds {
		h.Kinds = append(h.Kinds, string(k))
	}
	kind, key, worker, fault := idx(&h.Kinds), idx(&h.Keys), idx(&h.Workers), idx(&h.FaultKinds)
	start, end := int64(math.MaxInt64), int64(0)
	for _, e := range r.Events {
		if e.Call > 0 {
			start = min(start, e.Call)
		}
		start, end = min(start, e.Time), max(end, e.Time)
	}
	at := func(t int64) int64 {
		if t == math.MaxInt64 {
			return -1
		}
		return (t - start) / 1e5
	}
	h.Span = at(end)

	// Violations, and the writes each is about.
	vioOf := map[string]int64{}
	kept := keptVisuals(r)
	for i, v := range r.Violations {
		hv := htmlViolation{Resource: v.Resource, Kind: string(v.Kind), Detail: v.Detail}
		if kept[i] {
			hv.Visual = string(v.Visual)
		} else if len(v.Visual) > 0 {
			hv.Omitted = true
		}
		h.Violations = append(h.Violations, hv)
		for _, val := range v.Values {
			if _, ok := vioOf[v.ResKind().key()+val]; !ok {
				vioOf[v.ResKind().key()+val] = int64(i)
			}
		}
	}

	for _, k := range r.keys() {
		key(k)
	}
	for _, a := range Attempts(r.Events) {
		if a.Read {
			continue
		}
		oi := int64(slices.Index(outcomes, a.Outcome))
		if oi < 0 {
			oi = int64(slices.Index(outcomes, OutError))
		}
		vi, ok := vioOf[a.Res.key()+a.Value]
		if !ok {
			vi = -1
		}
		h.Writes = append(h.Writes, [8]int64{kind(string(a.Res)), key(a.Key), worker(a.Worker), a.Token, at(a.Call), at(a.Return), oi, vi})
		h.Values = append(h.Values, a.Value)
	}

	for _, ap := range r.Applied {
		h.Applied = append(h.Applied, [4]int64{int64(slices.Index(Receivers, ap.Receiver)), key(ap.Resource), ap.Token, at(ap.Time)})
	}

	// Holds: each successful lock until its unlock, or until its
	// worker's last event.
	last := map[string]int64{}
	for _, e := range r.Events {
		last[e.Worker] = max(last[e.Worker], e.Time)
	}
	type holdID struct {
		w, key string
		tok    int64
	}
	open := map[holdID]int{}
	for _, e := range r.Events {
		id := holdID{e.Worker, e.Key, e.Token}
		switch {
		case e.Ev == EvLock && e.OK:
			open[id] = len(h.Holds)
			h.Holds = append(h.Holds, [6]int64{key(e.Key), worker(e.Worker), e.Token, at(e.Time), at(last[e.Worker]), 1})
		case e.Ev == EvUnlock:
			if i, ok := open[id]; ok {
				h.Holds[i][4], h.Holds[i][5] = at(e.Time), 0
				delete(open, id)
			}
		case e.Ev == EvFault:
			w := int64(-1)
			if e.Worker != "" {
				w = worker(e.Worker)
			}
			h.Faults = append(h.Faults, [4]int64{fault(string(e.Fault)), w, at(e.Call), at(e.Time)})
			h.FaultDetail = append(h.FaultDetail, e.Value)
		}
	}
	for k, c := range r.Writes {
		h.Counts[string(k)] = c
	}
	h.addStalls(r, key, worker, at)
	return h
}

// addStalls adds r's stalls, with key, worker and at numbering their keys
// and workers and placing their times.
func (h *htmlRun) addStalls(r *Report, key, worker func(string) int64, at func(int64) int64) {
	for _, s := range r.Stalls {
		past := int64(0)
		if s.Past() {
			past = 1
		}
		h.Stalls = append(h.Stalls, [5]int64{key(s.Key), worker(s.Next), at(s.From), at(s.To), past})
		h.StallDetail = append(h.StallDetail, s.String())
	}
	st := r.StallStats()
	h.StallSummary = fmt.Sprintf("Liveness: %d stalls measured after a pause or kill of a holder, %d past their bound; p99 %v, longest %v.",
		st.Count, st.Past, st.P99.Round(time.Millisecond), st.Max.Round(time.Millisecond))
}

// key prefixes a value so that values are told apart by resource kind.
func (k ResKind) key() string { return string(k) + "\x00" }

// keys returns the keys the run's events name, in order of appearance.
func (r *Report) keys() []string {
	var ks []string
	seen := map[string]bool{}
	for _, e := range r.Events {
		if e.Key != "" && !seen[e.Key] {
			seen[e.Key] = true
			ks = append(ks, e.Key)
		}
	}
	slices.Sort(ks)
	return ks
}

// Drawn returns what the page [WriteHTML] writes for r must draw, from
// r's history and violations alone: the marks of each outcome ("ok",
// "stale", ...), "marked" (rings on writes a violation is about),
// "violations" (items in its list), "visuals" (porcupine's, as many as
// fit MaxVisualBytes), "holds" and "faults" (bars), "stalls" (marks on
// the holds' lanes) and "stalls-past" (those past their bound, in red),
// and for each resource
// ("res:" and its name), the marks in its plot.
func Drawn(r *Report) map[string]int {
	want := map[string]int{"violations": len(r.Violations), "stalls": len(r.Stalls), "stalls-past": r.StallStats().Past}
	for _, a := range Attempts(r.Events) {
		if !a.Read {
			want["res:"+a.Resource()]++
		}
	}
	for _, c := range r.Writes {
		want["ok"] += c.Accepted
		want["stale"] += c.Refused
		want["lost"] += c.LockLost
		want["unknown"] += c.Unknown
		want["error"] += c.Errors
	}
	marked := map[string]bool{}
	kept := keptVisuals(r)
	for i, v := range r.Violations {
		for _, val := range v.Values {
			marked[v.ResKind().key()+val] = true
		}
		if kept[i] {
			want["visuals"]++
		}
	}
	for _, a := range Attempts(r.Events) {
		if !a.Read && marked[a.Res.key()+a.Value] {
			want["marked"]++
		}
	}
	for _, e := range r.Events {
		switch {
		case e.Ev == EvLock && e.OK:
			want["holds"]++
		case e.Ev == EvFault:
			want["faults"]++
		}
	}
	return want
}

// Rendered checks dom, the document of a page [WriteHTML] wrote for runs
// as a browser left it once its script ran, and console, the messages its
// console printed, and returns what is wrong: a console message or script
// error, a page that did not finish drawing, or a count of marks, rings,
// bars or violations that is not what [Drawn] says.
func Rendered(dom string, console []string, runs ...*Report) []string {
	var probs []string
	for _, c := range console {
		probs = append(probs, "the page's console printed: "+c)
	}
	if strings.Contains(dom, "data-errors=") || !strings.Contains(dom, `data-rendered="ok"`) {
		box := "no error reported, and no data-rendered"
		if m := errorsBox.FindStringSubmatch(dom); m != nil && m[1] != "" {
			box = html.UnescapeString(m[1])
		}
		return append(probs, "the page did not render cleanly: "+box)
	}
	m := drawnBox.FindStringSubmatch(dom)
	if m == nil {
		return append(probs, "the page has no drawn counts")
	}
	var drawn map[string]map[string]int
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &drawn); err != nil {
		return append(probs, fmt.Sprintf("the page's drawn counts %q: %v", m[1], err))
	}
	for _, r := range runs {
		if r == nil {
			continue
		}
		got, want := drawn[r.name()], Drawn(r)
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != want[k] {
				probs = append(probs, fmt.Sprintf("%s run: the page drew %d %s, the history has %d", r.name(), got[k], k, want[k]))
			}
		}
	}
	return probs
}

var (
	drawnBox  = regexp.MustCompile(`(?s)<pre id="drawn"[^>]*>(.*?)</pre>`)
	errorsBox = regexp.MustCompile(`(?s)<div id="errors"[^>]*>(.*?)</div>`)
)
