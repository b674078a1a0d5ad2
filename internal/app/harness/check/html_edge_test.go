package check

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/browser"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The report's edge cases, each opened in Chromium: it renders without a
// script error and draws what the history holds for a run with nothing in
// it (what a failed verdict may leave), a run without fault kinds, nil
// runs, one write, writes all at one token, a key, worker and value with
// markup in them (drawn as text, never as elements), stalls (one past its
// bound, one not), effects applied by both receivers (one after the
// run's last event, as a drained outbox's), and a fault before the first
// event.
func TestHTMLEdgeCases(t *testing.T) {
	testenv.Long(t, "ten pages opened in Chromium, a few seconds each")
	chromium := browser.Require(t)
	t0 := int64(1_790_000_000) * 1e9
	write := func(w, key string, res ResKind, tok, seq int64, val string, at int64, out Outcome) []Event {
		return []Event{
			{Ev: EvInvoke, Worker: w, Key: key, Res: res, Token: tok, Seq: seq, Value: val, Time: at},
			{Ev: EvDone, Worker: w, Key: key, Res: res, Token: tok, Seq: seq, Value: val, Time: at + 1e6, Outcome: out},
		}
	}
	mk := func(events []Event, vs ...Violation) *Report {
		r := NewReport(Register, events, Attempts(events))
		r.Violations = vs
		r.FaultKinds = synthKinds
		return r
	}
	var sameTok []Event
	for i := range 5 {
		sameTok = append(sameTok, write("w0.0", "k", ResRow, 7, int64(i+1), "v"+string(rune('a'+i)), t0+int64(i)*1e7, OutOK)...)
	}
	bad := `k"</script><img src=x onerror=alert(1)>\`
	tests := []struct {
		name string
		runs []*Report
		frag string
	}{
		{"empty", []*Report{mk(nil)}, ""},
		{"nil and empty", []*Report{nil, mk(nil)}, ""},
		{"no fault kinds", []*Report{func() *Report {
			r := mk(write("w0.0", "k", ResRow, 1, 1, "v", t0, OutOK))
			r.FaultKinds = nil
			return r
		}()}, ""},
		{"faults only", []*Report{mk([]Event{{Ev: EvFault, Fault: "member", Value: "member 0", Call: t0, Time: t0 + 1e9}})}, ""},
		{"one write", []*Report{mk(write("w0.0", "k", ResRow, 1, 1, "v", t0, OutOK))}, ""},
		{"same token", []*Report{mk(sameTok)}, ""},
		{"odd key", []*Report{mk(append([]Event{{Ev: EvLock, Worker: "w<b>", Key: bad, OK: true, Token: 3, Time: t0}},
			write("w<b>", bad, ResRow, 3, 1, "<i>v</i>", t0+1e6, OutOK)...),
			Violation{Resource: ResourceName(ResRow, bad), Kind: vioLost, Detail: "<b>x</b>", Values: []string{"<i>v</i>"}})}, "control=0"},
		{"stalls, one past its bound", []*Report{func() *Report {
			ev := []Event{{Ev: EvLock, Worker: "w0.0", Key: "k", OK: true, Token: 1, Time: t0},
				{Ev: EvLock, Worker: "w2.0", Key: "j", OK: true, Token: 1, Time: t0},
				{Ev: EvFault, Fault: FaultPause, Worker: "w0.0", Call: t0 + 1e8, Time: t0 + 5e9},
				{Ev: EvFault, Fault: FaultKill, Worker: "w2.0", Call: t0 + 1e8, Time: t0 + 1e8},
				{Ev: EvLock, Worker: "w1.0", Key: "k", OK: true, Token: 2, Time: t0 + 12e8},
				{Ev: EvLock, Worker: "w3.0", Key: "j", OK: true, Token: 2, Time: t0 + 12e8}}
			ev = append(ev, write("w1.0", "k", ResRow, 2, 1, "a", t0+13e8, OutOK)...)
			ev = append(ev, write("w3.0", "j", ResRow, 2, 1, "b", t0+13e8, OutOK)...)
			ev[len(ev)-3].Time = t0 + 45e8 // w1.0's write answered 3.3 s after its lock
			r := mk(ev)
			r.Workload = Workload{Kinds: []ResKind{ResRow}, MustCatch: []ResKind{ResRow}}
			r.Stalls = Stalls(r.Workload, ev, time.Second)
			r.Violations = CheckLiveness(r.Stalls)
			if len(r.Stalls) != 2 || len(r.Violations) != 1 {
				t.Fatalf("got stalls %v, violations %v; want 2 stalls, 1 past its bound", r.Stalls, r.Violations)
			}
			return r
		}()}, "control=0"},
		{"effects applied", []*Report{func() *Report {
			ev := write("w0.0", "k", ResEffects, 1, 1, "v", t0, OutOK)
			r := NewReport(EffectsWorkload, ev, Attempts(ev))
			r.FaultKinds = synthKinds
			r.Applied = []Applied{{Receiver: ReceiverHTTP, Key: "x", Resource: "k", Token: 1, Time: t0 + 5e5},
				{Receiver: ReceiverJetStream, Key: "x", Resource: "k", Token: 1, Time: t0 + 8e5},
				{Receiver: ReceiverHTTP, Key: "y", Resource: "k", Token: 1, Time: t0 + 5e9}} // drained after the last event
			return r
		}()}, ""},
		{"fault before first event", []*Report{mk(append([]Event{{Ev: EvFault, Fault: "pause", Worker: "w0.0", Call: 0, Time: t0}},
			write("w0.0", "k", ResRow, 1, 1, "v", t0, OutOK)...))}, ""},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHTML(&b, tt.runs...); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "r.html")
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			page, err := browser.Open(t.Context(), chromium, path, tt.frag, "", 1200, 800)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range Rendered(page.DOM, page.Console, tt.runs...) {
				t.Error(p)
			}
			if bytes.Contains([]byte(page.DOM), []byte("<img src")) {
				t.Error("injected element in the DOM")
			}
		})
	}
}

// TestColoursUnkeyed: the comparison behind the legend's check finds a
// colour drawn that no entry keys, whichever entry is missing, and nothing
// when every colour drawn is keyed, however many entries share one.
func TestColoursUnkeyed(t *testing.T) {
	drawn := map[string]string{"rgb(1, 1, 1)": "hold inc0", "rgb(2, 2, 2)": "fault", "rgb(3, 3, 3)": "mark o-ok"}
	legend := map[string][]string{"hold": {"rgb(1, 1, 1)"}, "open": {"rgb(1, 1, 1)", "rgb(9, 9, 9)"},
		"fault-pause": {"rgb(2, 2, 2)"}, "ok": {"rgb(3, 3, 3)"}}
	if u := (Colours{drawn, legend}).Unkeyed(); len(u) != 0 {
		t.Errorf("every colour keyed: got unkeyed %q, want none", u)
	}
	tests := []struct {
		name, drop string
		want       []string
	}{
		{"without the pause fault's entry", "fault-pause", []string{"rgb(2, 2, 2) (fault)"}},
		{"without the accepted mark's entry", "ok", []string{"rgb(3, 3, 3) (mark o-ok)"}},
		{"without one of two entries of a colour", "hold", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			less := maps.Clone(legend)
			delete(less, tt.drop)
			if got := (Colours{drawn, less}).Unkeyed(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCheckZoom: a zoom whose holders' bars are not drawn alike, or that
// framed other than the holds of the violation's writes, is caught.
func TestCheckZoom(t *testing.T) {
	r := synthRun(1, 1200, false)
	want := zoomHolders(newHTMLRun(r), 0)
	if want < 2 {
		t.Fatalf("violation 0 (%s) has %d holders in its zoom, want the stale writer's and the newer one's", r.Violations[0], want)
	}
	page := func(holders, unlike int) string {
		return fmt.Sprintf(`<pre id="zoomed" hidden="">{"run":%q,"v":0,"holders":%d,"unlike":%d}</pre>`, r.name(), holders, unlike)
	}
	tests := []struct {
		name string
		dom  string
		ok   bool
	}{
		{"alike", page(want, 0), true},
		{"no zoom", `<pre id="zoomed" hidden=""></pre>`, true},
		{"one drawn otherwise", page(want, 1), false},
		{"one holder missing", page(want-1, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if probs := checkZoom(tt.dom, []*Report{r}); (len(probs) == 0) != tt.ok {
				t.Errorf("got %q, want ok %v", probs, tt.ok)
			}
		})
	}
}
