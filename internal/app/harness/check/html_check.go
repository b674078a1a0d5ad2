package check

import (
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Drawn returns what the page [WriteHTML] writes for r must draw, from
// r's history and violations alone: the marks of each outcome ("ok",
// "stale", ...), "marked" (rings on writes a violation is about),
// "violations" (items in its list), "visuals" (porcupine's, as many as
// fit MaxVisualBytes), "holds" and "faults" (bars), "stalls" (marks on
// the holds' lanes) and "stalls-past" (those past their bound, in red),
// "applied" (an effects run's: marks of the effects applied, drained ones
// too),
// for each resource ("res:" and its name), the marks in its plot, and for
// each key ("rows:" and its name), the rows of its holds' lane: one per
// worker slot that held it, however often its worker was restarted.
func Drawn(r *Report) map[string]int {
	want := map[string]int{"violations": len(r.Violations), "stalls": len(r.Stalls), "stalls-past": r.StallStats().Past}
	if slices.Contains(r.Workload.or().Kinds, ResEffects) {
		want["applied"] = len(r.Applied)
	}
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
	slots := map[string]map[string]bool{}
	for _, e := range r.Events {
		switch {
		case e.Ev == EvLock && e.OK:
			want["holds"]++
			if slots[e.Key] == nil {
				slots[e.Key] = map[string]bool{}
			}
			s, _ := slotOf(e.Worker)
			slots[e.Key][s] = true
		case e.Ev == EvFault:
			want["faults"]++
		}
	}
	for _, k := range r.keys() {
		want["rows:"+k] = len(slots[k])
	}
	return want
}

// Rendered checks dom, the document of a page [WriteHTML] wrote for runs
// as a browser left it once its script ran, and console, the messages its
// console printed, and returns what is wrong: a console message or script
// error, a page that did not finish drawing, a count of marks, rings,
// bars, rows or violations that is not what [Drawn] says, a colour drawn
// that the legend does not key, or a violation's zoom (opened by the
// page's fragment) whose holders' bars are not drawn alike.
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
	drawn, err := PageDrawn(dom)
	if err != nil {
		return append(probs, err.Error())
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
	probs = append(probs, checkColours(dom)...)
	return append(probs, checkZoom(dom, runs)...)
}

// PageDrawn returns what the page whose document is dom says it drew, by
// run name, counted as [Drawn] counts.
func PageDrawn(dom string) (map[string]map[string]int, error) {
	m := drawnBox.FindStringSubmatch(dom)
	if m == nil {
		return nil, fmt.Errorf("the page has no drawn counts")
	}
	var drawn map[string]map[string]int
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &drawn); err != nil {
		return nil, fmt.Errorf("the page's drawn counts %q: %v", m[1], err)
	}
	return drawn, nil
}

var (
	drawnBox   = regexp.MustCompile(`(?s)<pre id="drawn"[^>]*>(.*?)</pre>`)
	errorsBox  = regexp.MustCompile(`(?s)<div id="errors"[^>]*>(.*?)</div>`)
	coloursBox = regexp.MustCompile(`(?s)<pre id="colours"[^>]*>(.*?)</pre>`)
	zoomedBox  = regexp.MustCompile(`(?s)<pre id="zoomed"[^>]*>(.*?)</pre>`)
)

// Colours is what the page says of its colours, once drawn: each fill and
// stroke colour of the shapes drawn for the runs (the grid and the plots'
// backgrounds, marked "chrome", left out), with the class of one shape
// drawn in it; and the colours of each legend entry's swatch. Colours are
// as the browser computed them ("rgb(74, 111, 165)").
type Colours struct {
	Drawn  map[string]string   `json:"drawn"`
	Legend map[string][]string `json:"legend"`
}

// Unkeyed returns the colours drawn that no legend entry keys, each with
// the class of a shape drawn in it.
func (c Colours) Unkeyed() []string {
	keyed := map[string]bool{}
	for _, cs := range c.Legend {
		for _, col := range cs {
			keyed[col] = true
		}
	}
	var out []string
	for _, col := range slices.Sorted(maps.Keys(c.Drawn)) {
		if !keyed[col] {
			out = append(out, fmt.Sprintf("%s (%s)", col, c.Drawn[col]))
		}
	}
	return out
}

// PageColours returns what the page whose document is dom says of its
// colours.
func PageColours(dom string) (Colours, error) {
	var c Colours
	m := coloursBox.FindStringSubmatch(dom)
	if m == nil {
		return c, fmt.Errorf("the page says nothing of its colours")
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &c); err != nil {
		return c, fmt.Errorf("the page's colours %q: %v", m[1], err)
	}
	return c, nil
}

func checkColours(dom string) []string {
	c, err := PageColours(dom)
	if err != nil {
		return []string{err.Error()}
	}
	var probs []string
	for _, u := range c.Unkeyed() {
		probs = append(probs, "the page drew a colour its legend does not key: "+u)
	}
	return probs
}

// zoomed is what the page says of the violation it zoomed in on: how many
// lock holds it framed as the holders of the violation's writes, and how
// many of those are not drawn as the first is (its fill, frame, height,
// and a width of at least the holders' minimum).
type zoomed struct {
	Run     string `json:"run"`
	V       int    `json:"v"`
	Holders int    `json:"holders"`
	Unlike  int    `json:"unlike"`
}

// checkZoom checks the zoom the page opened, if it opened one: it framed
// the holds of the violation's writes, each drawn alike.
func checkZoom(dom string, runs []*Report) []string {
	m := zoomedBox.FindStringSubmatch(dom)
	if m == nil || strings.TrimSpace(m[1]) == "" {
		return nil
	}
	var z zoomed
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &z); err != nil {
		return []string{fmt.Sprintf("the page's zoom %q: %v", m[1], err)}
	}
	var probs []string
	for _, r := range runs {
		if r == nil || r.name() != z.Run || z.V >= len(r.Violations) {
			continue
		}
		if want := zoomHolders(newHTMLRun(r), z.V); z.Holders != want {
			probs = append(probs, fmt.Sprintf("%s run, violation %d's zoom: framed %d holders, want %d", z.Run, z.V, z.Holders, want))
		}
		if z.Unlike > 0 {
			probs = append(probs, fmt.Sprintf("%s run, violation %d's zoom: %d of its %d holders' bars are not drawn as the first", z.Run, z.V, z.Unlike, z.Holders))
		}
	}
	return probs
}

// zoomHolders returns how many holds the zoom of h's violation vi frames:
// those of its key, in the zoom's window, by a worker with a token that
// wrote one of the writes the violation is (first) about.
func zoomHolders(h htmlRun, vi int) int {
	v := h.Violations[vi]
	kind, key, _ := strings.Cut(v.Resource, ":")
	kk, ki := int64(slices.Index(h.Kinds, kind)), int64(slices.Index(h.Keys, key))
	from, to := int64(math.MaxInt64), int64(math.MinInt64)
	wrote := map[[2]int64]bool{}
	for _, w := range h.Writes {
		if w[7] != int64(vi) {
			continue
		}
		from, to = min(from, w[4]), max(to, w[4], w[5])
		if w[1] == ki {
			wrote[[2]int64{w[2], w[3]}] = true
		}
	}
	if from == math.MaxInt64 || kk < 0 || ki < 0 {
		return 0
	}
	pad := max(5000, (to-from)*3/10)
	from, to = max(0, from-pad), min(h.Span, to+pad)
	n := 0
	for _, hd := range h.Holds {
		if hd[0] == ki && hd[4] >= from && hd[3] <= to && wrote[[2]int64{hd[1], hd[2]}] {
			n++
		}
	}
	return n
}
