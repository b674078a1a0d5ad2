package check

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
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
		"Title": title(runs),
		"CSS":   template.CSS(reportCSS),
		"JS":    template.JS(reportJS),
		"Data":  template.JS(js), // json.Marshal escapes <, > and &
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
	Name     string   `json:"name"`
	Fenced   bool     `json:"fenced"`
	Seed     int64    `json:"seed"`
	Duration string   `json:"duration"`
	Span     int64    `json:"span"`
	Kinds    []string `json:"kinds"`
	Keys     []string `json:"keys"`
	Workers  []string `json:"workers"`
	// Slots are the worker slots ("w1"), in order; WorkerSlot is each
	// worker's slot (index in Slots) and incarnation: w1.10 is slot w1's
	// tenth restart.
	Slots      []string   `json:"slots"`
	WorkerSlot [][2]int64 `json:"workerSlot"`
	Outcomes   []string   `json:"outcomes"`
	FaultKinds []string   `json:"faultKinds"`
	FaultHow   []string   `json:"faultHow"`
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
	for _, ap := range r.Applied {
		// The receivers apply effects until the outbox is drained, after
		// the workers' last events.
		end = max(end, ap.Time)
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
	h.addSlots()
	return h
}

// addSlots numbers the slots of h's workers.
func (h *htmlRun) addSlots() {
	h.Slots, h.WorkerSlot = []string{}, [][2]int64{}
	for _, w := range h.Workers {
		if s, _ := slotOf(w); !slices.Contains(h.Slots, s) {
			h.Slots = append(h.Slots, s)
		}
	}
	slices.SortFunc(h.Slots, cmpSlot)
	for _, w := range h.Workers {
		s, n := slotOf(w)
		h.WorkerSlot = append(h.WorkerSlot, [2]int64{int64(slices.Index(h.Slots, s)), n})
	}
}

// slotOf splits a worker's name, its slot's and its incarnation's ("w1.10":
// "w1", 10). A name without an incarnation is a slot of its own.
func slotOf(worker string) (string, int64) {
	i := strings.LastIndexByte(worker, '.')
	if i < 0 {
		return worker, 0
	}
	n, err := strconv.ParseInt(worker[i+1:], 10, 64)
	if err != nil || n < 0 {
		return worker, 0
	}
	return worker[:i], n
}

// cmpSlot orders slots by name, and those that differ only in their
// trailing number by that number: w2 before w10.
func cmpSlot(a, b string) int {
	pa, na := splitNum(a)
	pb, nb := splitNum(b)
	if pa != pb || na < 0 || nb < 0 {
		return strings.Compare(a, b)
	}
	return cmp.Compare(na, nb)
}

// splitNum splits s's trailing digits off: "w12" is "w" and 12; -1 when
// there are none (or too many).
func splitNum(s string) (string, int64) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.ParseInt(s[i:], 10, 64)
	if err != nil {
		return s, -1
	}
	return s[:i], n
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
