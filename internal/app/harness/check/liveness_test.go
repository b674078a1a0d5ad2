package check

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// sec is a time s seconds into a synthetic run, in Unix nanoseconds.
func sec(s float64) int64 { return int64(math.Round(s*1000)) * int64(time.Millisecond) }

// liveRow is the workload of the liveness cases: one row per key.
var liveRow = Workload{Kinds: []ResKind{ResRow}}

// lockEv, unlockEv, faultEv and writeEvs are a synthetic run's events.
func lockEv(w, key string, tok int64, at float64) Event {
	return Event{Ev: EvLock, Worker: w, Key: key, Token: tok, OK: true, Time: sec(at)}
}

func unlockEv(w, key string, tok int64, at float64) Event {
	return Event{Ev: EvUnlock, Worker: w, Key: key, Token: tok, Time: sec(at)}
}

func faultEv(kind FaultKind, w string, from, to float64) Event {
	return Event{Ev: EvFault, Fault: kind, Worker: w, Call: sec(from), Time: sec(to)}
}

// writeEvs are the invoke and done events of a write of key's row by w
// with tok, sent at call and answered at ret with out.
func writeEvs(w, key string, tok, seq int64, call, ret float64, out Outcome) []Event {
	e := Event{Ev: EvInvoke, Worker: w, Key: key, Res: ResRow, Token: tok, Seq: seq, Value: w + "/" + key, Time: sec(call)}
	d := e
	d.Ev, d.Time, d.Outcome = EvDone, sec(ret), out
	return []Event{e, d}
}

// pausedThenNext is w1 holding k with token 1, paused at 1 s for 5 s; w2
// taking k at 2.2 s with token 2 and its first write accepted at
// accepted s; then more events, in order.
func pausedThenNext(accepted float64, more ...Event) []Event {
	ev := []Event{lockEv("w1", "k", 1, 0.5)}
	ev = append(ev, writeEvs("w1", "k", 1, 1, 0.6, 0.7, OutOK)...)
	ev = append(ev, faultEv(FaultPause, "w1", 1, 6), lockEv("w2", "k", 2, 2.2))
	ev = append(ev, writeEvs("w2", "k", 2, 1, 2.3, accepted, OutOK)...)
	ev = append(ev, unlockEv("w2", "k", 2, accepted+0.1))
	return append(ev, more...)
}

// laterHolderPaused is w1 holding k with token 1, paused at 1 s for 5 s;
// w2 taking k at 2.2 s with token 2, its write failing at once; w3 taking
// k at 2.5 s with token 3, paused from 2.6 s to 5 s, and its write then
// accepted at 6.1 s.
func laterHolderPaused() []Event {
	ev := []Event{lockEv("w1", "k", 1, 0.5), faultEv(FaultPause, "w1", 1, 6), lockEv("w2", "k", 2, 2.2)}
	ev = append(ev, writeEvs("w2", "k", 2, 1, 2.3, 2.35, OutError)...)
	ev = append(ev, unlockEv("w2", "k", 2, 2.4), lockEv("w3", "k", 3, 2.5), faultEv(FaultPause, "w3", 2.6, 5))
	ev = append(ev, writeEvs("w3", "k", 3, 1, 5.1, 6.1, OutOK)...)
	return append(ev, unlockEv("w3", "k", 3, 6.2))
}

func TestStalls(t *testing.T) {
	const ttl = time.Second // bound without faults: 2 s
	tests := []struct {
		name    string
		events  []Event
		waits   []time.Duration // of the stalls measured
		bounds  []time.Duration
		violate bool
	}{
		{"the next holder writes at once", pausedThenNext(2.4), []time.Duration{200 * time.Millisecond}, []time.Duration{2 * time.Second}, false},
		{"within the bound", pausedThenNext(4.1), []time.Duration{1900 * time.Millisecond}, []time.Duration{2 * time.Second}, false},
		{"past the bound: the next holder waits out the freeze", pausedThenNext(6.1), []time.Duration{3900 * time.Millisecond}, []time.Duration{2 * time.Second}, true},
		{"a member crash in the window adds its duration, a lease and FaultSlack",
			pausedThenNext(6.1, faultEv("member", "", 3, 3.5)), []time.Duration{3900 * time.Millisecond}, []time.Duration{6500 * time.Millisecond}, false},
		{"a request fault on the next holder adds to its bound",
			pausedThenNext(6.1, faultEv("request", "w2", 2.25, 2.25)), []time.Duration{3900 * time.Millisecond}, []time.Duration{6 * time.Second}, false},
		{"a fault outside the window adds nothing",
			pausedThenNext(6.1, faultEv("member", "", 7, 8)), []time.Duration{3900 * time.Millisecond}, []time.Duration{2 * time.Second}, true},
		{"a pause of another worker adds nothing: waiting on it is the stall",
			pausedThenNext(6.1, faultEv(FaultPause, "w3", 2.5, 5)), []time.Duration{3900 * time.Millisecond}, []time.Duration{2 * time.Second}, true},
		{"a pause of the next holder in the window leaves its stall out",
			pausedThenNext(6.1, faultEv(FaultPause, "w2", 2.5, 5)), nil, nil, false},
		{"a pause of a later holder of the key in the window leaves the stall out: its own stall covers the key",
			laterHolderPaused(), nil, nil, false},
		{"a kill is measured as a pause",
			func() []Event {
				ev := pausedThenNext(6.1)
				ev[3].Fault = FaultKill
				return ev
			}(), []time.Duration{3900 * time.Millisecond}, []time.Duration{2 * time.Second}, true},
		{"a fault on a worker that held nothing is not measured",
			[]Event{faultEv(FaultPause, "w1", 1, 6), lockEv("w2", "k", 2, 2.2), writeEvs("w2", "k", 2, 1, 2.3, 9, OutOK)[1]}, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stalls := Stalls(liveRow, tt.events, ttl)
			var waits, bounds []time.Duration
			for _, s := range stalls {
				waits, bounds = append(waits, s.Wait()), append(bounds, s.Bound)
			}
			if !slices.Equal(waits, tt.waits) || !slices.Equal(bounds, tt.bounds) {
				t.Fatalf("got waits %v, bounds %v; want %v, %v", waits, bounds, tt.waits, tt.bounds)
			}
			vs := CheckLiveness(stalls)
			if got := len(vs) > 0; got != tt.violate {
				t.Fatalf("got violations %v, want any: %v", vs, tt.violate)
			}
			for _, v := range vs {
				if v.Kind != vioStall || v.Resource != "row:k" {
					t.Errorf("got %s %s, want %s row:k", v.Kind, v.Resource, vioStall)
				}
			}
		})
	}
}

// TestStallsWhoseWrites checks which writes end a stall: only an
// accepted write by the next holder or a later one, on every resource
// kind of the key; a reader's hold is passed over.
func TestStallsWhoseWrites(t *testing.T) {
	const ttl = time.Second
	base := func() []Event {
		return []Event{lockEv("w1", "k", 1, 0.5), faultEv(FaultPause, "w1", 1, 6)}
	}
	tests := []struct {
		name string
		wl   Workload
		more [][]Event
		wait time.Duration
		open bool
		res  ResKind // the write waited on
	}{
		{"the old holder's late write accepted does not end it", liveRow, [][]Event{
			{lockEv("w2", "k", 2, 2)}, writeEvs("w1", "k", 1, 1, 6, 6.1, OutOK), writeEvs("w2", "k", 2, 1, 2.1, 6.5, OutOK)},
			4500 * time.Millisecond, false, ResRow},
		{"a refused write does not end it; the next holder's later one does", liveRow, [][]Event{
			{lockEv("w2", "k", 2, 2)}, writeEvs("w2", "k", 2, 1, 2.1, 2.2, OutError), writeEvs("w2", "k", 2, 2, 2.3, 2.4, OutOK)},
			400 * time.Millisecond, false, ResRow},
		{"a reader is passed over", liveRow, [][]Event{
			{lockEv("w2", "k", 2, 2), unlockEv("w2", "k", 2, 2.5), lockEv("w3", "k", 3, 3)}, writeEvs("w3", "k", 3, 1, 3, 3.1, OutOK)},
			100 * time.Millisecond, false, ResRow},
		{"every kind of the workload: the last first write counts", Workload{Kinds: []ResKind{ResRow, ResEtcd}}, [][]Event{
			{lockEv("w2", "k", 2, 2)}, writeEvs("w2", "k", 2, 1, 2.1, 2.2, OutOK),
			{{Ev: EvInvoke, Worker: "w2", Key: "k", Res: ResEtcd, Token: 2, Seq: 2, Time: sec(2.3)}, {Ev: EvDone, Worker: "w2", Key: "k", Res: ResEtcd, Token: 2, Seq: 2, Time: sec(5.3), Outcome: OutOK}}},
			3300 * time.Millisecond, false, ResEtcd},
		{"no accepted write before the run ends", liveRow, [][]Event{
			{lockEv("w2", "k", 2, 2)}, writeEvs("w2", "k", 2, 1, 2.1, 7, OutUnknown)},
			5 * time.Second, true, ResRow},
		{"a bank transfer's credit counts for its credited account", Bank, [][]Event{
			{lockEv("w2", "k", 2, 2), lockEv("w2", "j", 7, 2)},
			bankEvs("w2", "j", "k", 7, 2.1, 2.2), bankEvs2("w2", "j", "k", 7, 2.3, 2.4, ResBankEtcd), bankEvs2("w2", "j", "k", 7, 2.5, 5, ResBankS3)},
			3 * time.Second, false, ResBankS3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := base()
			for _, m := range tt.more {
				ev = append(ev, m...)
			}
			stalls := Stalls(tt.wl, ev, ttl)
			if len(stalls) != 1 {
				t.Fatalf("got %d stalls %v, want 1", len(stalls), stalls)
			}
			if s := stalls[0]; s.Wait() != tt.wait || s.Open != tt.open || s.Res != tt.res {
				t.Errorf("got wait %v, open %v, waited on %s; want %v, %v, %s (%s)", s.Wait(), s.Open, s.Res, tt.wait, tt.open, tt.res, s)
			}
		})
	}
}

// bankEvs is an acknowledged PostgreSQL transfer by w from from to to,
// with from's token tok.
func bankEvs(w, from, to string, tok int64, call, ret float64) []Event {
	return bankEvs2(w, from, to, tok, call, ret, ResBankPG)
}

func bankEvs2(w, from, to string, tok int64, call, ret float64, kind ResKind) []Event {
	x := &Transfer{ID: w + string(kind), From: from, To: to, Amount: 1, Acked: 2, Tried: 2}
	e := Event{Ev: EvInvoke, Worker: w, Key: from, Res: kind, Token: tok, Seq: int64(call * 10), Value: x.ID, Time: sec(call), Transfer: x}
	d := e
	d.Ev, d.Time, d.Outcome = EvDone, sec(ret), OutOK
	return []Event{e, d}
}

// A liveness control proves something only with a stall past its bound,
// and keeps the safety verdict: a safety violation fails it too. A fenced
// run's stall past its bound fails its verdict; the summary counts the
// stalls.
func TestLivenessVerdict(t *testing.T) {
	stalls := Stalls(liveRow, pausedThenNext(6.1), time.Second)
	past := CheckLiveness(stalls)
	if len(past) != 1 {
		t.Fatalf("got %d stalls past the bound, want 1", len(past))
	}
	safety := vio("row:k", vioTokenOrder, "token 1 after 2")
	tests := []struct {
		name string
		vs   []Violation
		want string // a substring of the one reason; none when ""
	}{
		{"a stall past the bound, nothing else", past, ""},
		{"no stall past the bound", nil, "no stall past its bound"},
		{"a stall and a safety violation", append([]Violation{safety}, past...), "a safety violation: row:k token-order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Seed: 3, Fenced: true, Variant: "without preemption", Violations: tt.vs, Stalls: stalls}
			why := LivenessVerdict(r)
			switch {
			case tt.want == "" && len(why) != 0:
				t.Fatalf("LivenessVerdict: got %q, want none", why)
			case tt.want != "" && (len(why) != 1 || !strings.Contains(why[0], tt.want)):
				t.Fatalf("LivenessVerdict: got %q, want one reason with %q", why, tt.want)
			}
		})
	}
	fenced := &Report{Seed: 3, Fenced: true, Writes: map[ResKind]*Counts{}, Violations: past, Stalls: stalls}
	for _, k := range ResKinds {
		fenced.Writes[k] = &Counts{}
	}
	if why := Verdict(fenced, nil, Minimums{}); len(why) != 1 || !strings.Contains(why[0], "stall") {
		t.Errorf("Verdict of a fenced run with a stall: got %q, want one reason naming the stall", why)
	}
	if st := fenced.StallStats(); st.Count != 1 || st.Past != 1 || st.Max != 3900*time.Millisecond {
		t.Errorf("got %+v, want 1 stall, 1 past, max 3.9s", st)
	}
	var b strings.Builder
	PrintSummary(&b, fenced, nil)
	if !slices.ContainsFunc(strings.Split(b.String(), "\n"), func(l string) bool {
		return slices.Equal(strings.Fields(l), []string{"fenced", "1", "1", "3.9s", "3.9s"})
	}) {
		t.Errorf("summary %q: want the stalls' row: 1 stall, 1 past its bound, p99 and longest 3.9s", b.String())
	}
}
