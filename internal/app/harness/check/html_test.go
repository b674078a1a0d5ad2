package check

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/browser"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// synthKinds are the fault kinds of a synthetic run, as the harness's.
var synthKinds = []FaultDesc{{"pause", "SIGSTOP a holder"}, {"kill", "SIGKILL a holder"}, {"member", "SIGKILL an etcd member"},
	{"partition", "black-hole a worker's traffic"}, {"request", "a late, lost or doubled request"}, {"replace", "replace an etcd member"}}

// synthRun makes the report of a run of about writes register writes, as
// the harness would, checked by the real checker: workers take keys' locks
// in turn and write every resource kind; now and then a holder is paused
// past its lease and its write, stale, arrives after the next holder's.
// Fenced, the resource refuses it; in the control it lands, after a newer
// token: a token-order violation, and a history that is not linearizable.
// Some writes are refused by the guard, some lose their answer, some fail;
// the nemesis's faults are in the history too.
func synthRun(seed uint64, writes int, fenced bool) *Report {
	return synthRestarts(seed, writes, fenced, false)
}

// synthRestarts is synthRun, and with restart, each section's worker is
// restarted after its unlock, as a long run restarts its killed workers:
// its slot's next section is a new worker's.
func synthRestarts(seed uint64, writes int, fenced, restart bool) *Report {
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := []string{"s-k0", "s-k1", "s-k2", "s-k3"}
	var events []Event
	st := NewStorage()
	t := int64(1_790_000_000) * 1e9
	tok, seq, incar := int64(10), int64(0), make([]int, 6)
	wid := func(n int) string { return fmt.Sprintf("w%d.%d", n, incar[n]) }
	store := func(res string, tok int64, val string) {
		st.Writes[res] = append(st.Writes[res], Record{tok, val})
		st.Final[res] = val
	}
	type pending struct {
		w, key string
		res    ResKind
		tok    int64
		val    string
		seq    int64
	}
	var stale *pending
	for n := 0; n < writes; {
		w, key := rng.IntN(6), keys[rng.IntN(len(keys))]
		tok += 1 + rng.Int64N(4)
		t += int64(rng.IntN(3)+1) * 1e6
		events = append(events, Event{Ev: EvLock, Worker: wid(w), Key: key, OK: true, Token: tok, Time: t})
		for _, kind := range ResKinds {
			// A holder reads what it will write over: the read that shows
			// a stale write that landed.
			t += 2e5
			events = append(events, Event{Ev: EvRead, Worker: wid(w), Key: key, Res: kind, Value: st.Final[ResourceName(kind, key)], Call: t - 1e5, Time: t})
		}
		killed := false
		for _, kind := range ResKinds {
			seq++
			val := fmt.Sprintf("%s/t%d/s%d", wid(w), tok, seq)
			t += int64(rng.IntN(2000)+300) * 1e3
			events = append(events, Event{Ev: EvInvoke, Worker: wid(w), Key: key, Res: kind, Token: tok, Seq: seq, Value: val, Time: t})
			n++
			out := OutOK
			switch r := rng.IntN(400); {
			case r == 0:
				out = OutLost
			case r == 1:
				out = OutError
			case r == 2:
				out = OutUnknown
			case r >= 3 && r < 12 && stale == nil && key == keys[0]:
				// The holder freezes here; its write goes out after the
				// next holder's.
				stale = &pending{wid(w), key, kind, tok, val, seq}
				continue
			}
			done := t + int64(rng.IntN(3000)+500)*1e3
			if out == OutOK || (out == OutUnknown && rng.IntN(2) == 0) {
				store(ResourceName(kind, key), tok, val)
			}
			if out == OutUnknown && rng.IntN(3) == 0 {
				// The fault names the worker killed, as the harness's
				// nemesis does; its slot's next worker is a new one.
				killed = true
				events = append(events, Event{Ev: EvFault, Fault: "kill", Worker: wid(w), Call: done, Time: done})
				incar[w]++
				break
			}
			events = append(events, Event{Ev: EvDone, Worker: wid(w), Key: key, Res: kind, Token: tok, Seq: seq, Value: val, Time: done, Outcome: out})
			t = done
		}
		if !killed {
			t += 1e6
			events = append(events, Event{Ev: EvUnlock, Worker: wid(w), Key: key, Token: tok, Time: t})
			if restart {
				incar[w]++
			}
		}
		if stale != nil && newer(st, ResourceName(stale.res, stale.key), stale.tok) {
			// The newer holder wrote; the frozen one wakes up.
			t += 2e6
			events = append(events, Event{Ev: EvFault, Fault: "pause", Worker: stale.w, Call: t - 3e9, Time: t})
			out := OutStale
			if !fenced {
				out = OutOK
				store(ResourceName(stale.res, stale.key), stale.tok, stale.val)
			}
			events = append(events, Event{Ev: EvDone, Worker: stale.w, Key: stale.key, Res: stale.res, Token: stale.tok, Seq: stale.seq,
				Value: stale.val, Time: t + 1e6, Outcome: out})
			stale = nil
		}
		if rng.IntN(20) == 0 {
			f := synthKinds[rng.IntN(len(synthKinds))].Kind
			worker := wid(rng.IntN(6))
			if f == "member" || f == "replace" {
				worker = ""
			}
			events = append(events, Event{Ev: EvFault, Fault: f, Worker: worker, Call: t - 1e9, Time: t, Value: "synthetic"})
		}
	}
	atts := Attempts(events)
	r := NewReport(Register, events, atts)
	r.Seed, r.Fenced, r.FaultKinds, r.Duration = int64(seed), fenced, synthKinds, time.Duration(t-int64(1_790_000_000)*1e9)
	r.Stalls = Stalls(Register, events, time.Second)
	r.Violations = append(Check(atts, st), CheckLiveness(r.Stalls)...)
	return r
}

func TestSynthRun(t *testing.T) {
	for seed := range uint64(20) {
		if vs := synthRun(seed, 1200, true).Violations; len(vs) != 0 {
			t.Fatalf("fenced synthetic run, seed %d: %v", seed, vs)
		}
	}
	fenced, control := synthRun(1, 1200, true), synthRun(1, 1200, false)
	kinds := control.violationsByKind()
	if kinds[vioTokenOrder] == 0 || kinds[vioLinearizable] == 0 {
		t.Fatalf("control synthetic run: want token-order and not-linearizable violations, got %v", kinds)
	}
	for _, v := range control.Violations {
		if v.Kind == vioLinearizable && !bytes.Contains(v.Visual, []byte("<html")) {
			t.Errorf("%s: no porcupine visualization (%d bytes)", v, len(v.Visual))
		}
	}
	if len(fenced.Stalls) == 0 {
		t.Fatal("fenced synthetic run: no stall measured after its kills, so the report's stall marks go untested")
	}
	if fenced.Writes[ResRow].Refused+fenced.Writes[ResTx].Refused+fenced.Writes[ResS3].Refused+
		fenced.Writes[ResEtcd].Refused+fenced.Writes[ResSQL].Refused+fenced.Writes[ResRedis].Refused+fenced.Writes[ResJetStream].Refused+fenced.Writes[ResAzure].Refused == 0 {
		t.Fatal("fenced synthetic run refused nothing")
	}
}

// newer reports whether storage holds a write of res with a token above tok.
func newer(st *Storage, res string, tok int64) bool {
	ws := st.Writes[res]
	return len(ws) > 0 && ws[len(ws)-1].Token > tok
}

// TestHTMLSelfContained: the page fetches nothing, escapes what the
// history says, and stays small at the size of a long run.
func TestHTMLSelfContained(t *testing.T) {
	fenced, control := synthRun(2, 12_000, true), synthRun(2, 12_000, false)
	control.Events = append(control.Events, Event{Ev: EvFault, Fault: "request", Worker: "w1.0", Value: `</script><script>alert(1)</script>`,
		Call: control.Events[0].Time, Time: control.Events[0].Time})
	var b bytes.Buffer
	if err := WriteHTML(&b, fenced, control); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := b.Len(); n > 5<<20 {
		t.Errorf("report of 2 × 12,000 writes is %d bytes, want < 5 MB", n)
	}
	t.Logf("report of 2 × 12,000 writes: %d bytes", b.Len())
	// No fetch: no src or href attribute outside the data, no import.
	outside := regexp.MustCompile(`(?s)<script>var REPORT = .*?</script>`).ReplaceAllString(page, "")
	for _, bad := range []string{"src=", "href=", "@import", "url(", "<link", "fetch(", "XMLHttpRequest"} {
		if strings.Contains(outside, bad) {
			t.Errorf("page has %q outside its data", bad)
		}
	}
	if strings.Contains(page, "<script>alert(1)") {
		t.Error("a value from the history was written into the page unescaped")
	}
}

// TestHTMLInBrowser opens the report of a synthetic run of the size of a
// long one (12,000 writes, fenced and control; 1,200 under -short) in
// headless Chromium: it must render without a script error, with as many
// marks of each outcome as the history has writes, a ring on every write
// a violation is about, a bar per lock hold and one per fault; the
// screenshot is kept in the artifacts directory. The controls: the same
// page with a script error, and the page's counts checked against a
// history with one write fewer, are both caught.
func TestHTMLInBrowser(t *testing.T) {
	testenv.Long(t, "it starts a browser")
	chromium := browser.Require(t)
	writes := 12_000
	if testing.Short() {
		writes = 1_200
	}
	fenced, control := synthRun(3, writes, true), synthRun(3, writes, false)
	dir := testenv.ArtifactDir(t)
	path := filepath.Join(dir, "report-synthetic.html")
	var b bytes.Buffer
	start := time.Now()
	if err := WriteHTML(&b, fenced, control); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d writes a run, %d bytes) in %v", path, writes, b.Len(), time.Since(start))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := strings.TrimSuffix(path, ".html") + ".png"
	page, err := browser.Open(t.Context(), chromium, path, "control=0", shot, 1600, 1200)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	CheckRendered(t, page, fenced, control)
	checkLegendControl(t, page.DOM)

	// Porcupine's visualization, which the page shows in an iframe when
	// asked, renders too.
	var visual []byte
	for _, v := range control.Violations {
		if len(v.Visual) > 0 {
			visual = v.Visual
			break
		}
	}
	vpath := filepath.Join(dir, "report-synthetic-porcupine.html")
	if err := os.WriteFile(vpath, visual, 0o644); err != nil {
		t.Fatal(err)
	}
	vpage, err := browser.Open(t.Context(), chromium, vpath, "", "", 1200, 800)
	if err != nil {
		t.Fatal(err)
	}
	if len(vpage.Console) > 0 || strings.Count(vpage.DOM, "<svg") == 0 || strings.Count(vpage.DOM, "<rect") < 10 {
		t.Errorf("porcupine's visualization did not render: console %q, %d svg, %d rect elements",
			vpage.Console, strings.Count(vpage.DOM, "<svg"), strings.Count(vpage.DOM, "<rect"))
	}

	// Controls. A history with one write fewer than the page drew:
	short := *control
	short.Events = slices.Clone(control.Events)
	for i, e := range short.Events {
		if e.Ev == EvInvoke {
			short.Events = slices.Delete(short.Events, i, i+1)
			break
		}
	}
	short.Writes = NewReport(Register, short.Events, Attempts(short.Events)).Writes
	if probs := Rendered(page.DOM, page.Console, &short); len(probs) == 0 {
		t.Error("control: the page's counts matched a history with one write fewer")
	}
	// A page whose script fails:
	broken := filepath.Join(dir, "report-broken.html")
	html := strings.Replace(b.String(), "runs.forEach(function (run) {", "runs.push(null); runs.forEach(function (run) {", 1)
	if err := os.WriteFile(broken, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := browser.Open(t.Context(), chromium, broken, "", "", 800, 600)
	if err != nil {
		t.Fatal(err)
	}
	probs := Rendered(bad.DOM, bad.Console, fenced, control)
	if len(probs) == 0 {
		t.Error("control: a page whose script throws passed")
	}
	t.Logf("control, a script that throws: %q", probs)
}

// checkLegendControl: the legend keys every colour the page drew
// (CheckRendered), and the check would see it if it did not: the page's
// colours less any legend entry with a colour drawn that no other entry
// keys (the lock holds', each fault kind's, ...) leave that colour
// unkeyed.
func checkLegendControl(t *testing.T, dom string) {
	t.Helper()
	cols, err := PageColours(dom)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d colours drawn, %d legend entries", len(cols.Drawn), len(cols.Legend))
	var caught []string
	for name := range cols.Legend {
		less := Colours{Drawn: cols.Drawn, Legend: maps.Clone(cols.Legend)}
		delete(less.Legend, name)
		if ownDrawn(cols, name) && len(less.Unkeyed()) == 0 {
			t.Errorf("control: without the legend's %q entry, its colours %v still count as keyed", name, cols.Legend[name])
		}
		if len(less.Unkeyed()) > 0 {
			caught = append(caught, name)
		}
	}
	slices.Sort(caught)
	for _, want := range []string{"hold", "fault-pause", "fault-kill", "stall"} {
		if !slices.Contains(caught, want) {
			t.Errorf("control: a legend without its %q entry passed (caught without: %v)", want, caught)
		}
	}
}

// ownDrawn reports whether legend entry name keys a colour drawn that no
// other entry keys.
func ownDrawn(c Colours, name string) bool {
	for _, col := range c.Legend[name] {
		if _, drawn := c.Drawn[col]; !drawn {
			continue
		}
		other := false
		for n, cs := range c.Legend {
			other = other || (n != name && slices.Contains(cs, col))
		}
		if !other {
			return true
		}
	}
	return false
}

// TestHTMLRowsPerSlot: in a long run every worker is restarted again and
// again; the report draws each key's holds in one row per worker slot,
// its restarted workers along that row, not a row per worker.
func TestHTMLRowsPerSlot(t *testing.T) {
	testenv.Long(t, "it starts a browser")
	chromium := browser.Require(t)
	r := synthRestarts(5, 1500, true, true)
	workers, slots := map[string]bool{}, map[string]bool{}
	for _, e := range r.Events {
		if e.Ev == EvLock {
			workers[e.Worker] = true
			s, _ := slotOf(e.Worker)
			slots[s] = true
		}
	}
	if len(workers) < 10*len(slots) {
		t.Fatalf("the history has %d workers in %d slots: want at least 10 a slot, to tell a row a slot from a row a worker", len(workers), len(slots))
	}
	path := filepath.Join(t.TempDir(), "restarts.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	page, err := browser.Open(t.Context(), chromium, path, "", "", 1200, 800)
	if err != nil {
		t.Fatal(err)
	}
	CheckRendered(t, page, r)
	drawn, err := PageDrawn(page.DOM)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range r.keys() {
		if got := drawn[r.name()]["rows:"+k]; got != len(slots) {
			t.Errorf("key %s: %d rows of holds, want %d (one per worker slot; the history has %d workers)", k, got, len(slots), len(workers))
		}
	}
}

// CheckRendered checks page, the report of runs as Chromium showed it.
func CheckRendered(t *testing.T, page *browser.Page, runs ...*Report) {
	t.Helper()
	for _, p := range Rendered(page.DOM, page.Console, runs...) {
		t.Error(p)
	}
}

func BenchmarkWriteHTML(b *testing.B) {
	fenced, control := synthRun(4, 12_000, true), synthRun(4, 12_000, false)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := WriteHTML(&buf, fenced, control); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/report")
}
