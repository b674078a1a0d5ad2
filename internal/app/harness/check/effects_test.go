package check

import (
	"math"
	"slices"
	"testing"
)

func TestCheckEffects(t *testing.T) {
	tr := func(id string, out Outcome) Attempt {
		a := xfer(ResEffects, id, "a", "b", 5, out, 0, 2)
		a.Return = 1
		return a
	}
	ok, stale, failed, unknown := tr("w0/x1", OutOK), tr("w1/x1", OutStale), tr("w2/x1", OutError), tr("w3/x1", OutUnknown)
	both := func(id string) []Applied {
		return []Applied{{Receiver: ReceiverHTTP, Key: id + "-h", Resource: "a", Transfer: id},
			{Receiver: ReceiverJetStream, Key: id + "-j", Resource: "b", Transfer: id}}
	}
	landed := func(ids ...string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	going := xfer(ResEffects, "w4/x1", "a", "b", 5, OutUnknown, 0, 2) // no done event yet
	going.Return = math.MaxInt64
	atts := []Attempt{ok, stale, failed, unknown, going}
	tests := []struct {
		name string
		st   Effects
		want []ViolationKind
	}{
		{"clean: acknowledged once, unknown that landed once, refused and failed never",
			Effects{Landed: landed("w0/x1", "w3/x1"), Applied: append(both("w0/x1"), both("w3/x1")...), Final: true}, nil},
		{"clean: unknown that did not land, not applied",
			Effects{Landed: landed("w0/x1"), Applied: both("w0/x1"), Final: true}, nil},
		{"applied twice",
			Effects{Landed: landed("w0/x1"), Applied: append(both("w0/x1"), Applied{Receiver: ReceiverHTTP, Key: "other", Resource: "a", Transfer: "w0/x1"}), Final: true},
			[]ViolationKind{vioEffectTwice}},
		{"effect of a refused transfer",
			Effects{Landed: landed("w0/x1"), Applied: append(both("w0/x1"), both("w1/x1")[0]), Final: true},
			[]ViolationKind{vioEffectUnlanded}},
		{"effect of an unknown transfer that did not land, final",
			Effects{Landed: landed("w0/x1"), Applied: append(both("w0/x1"), both("w3/x1")[1]), Final: true},
			[]ViolationKind{vioEffectUnlanded}},
		{"effect of an unknown transfer that did not land, while running",
			Effects{Landed: landed("w0/x1"), Applied: append(both("w0/x1"), both("w3/x1")[1])}, []ViolationKind{vioEffectUnlanded}},
		{"effect of a transfer still under way, while running: not counted",
			Effects{Landed: landed(), Applied: both("w4/x1")[:1]}, nil},
		{"effect of a transfer whose worker died, final",
			Effects{Landed: landed("w0/x1"), Applied: append(both("w0/x1"), both("w4/x1")[0]), Final: true}, []ViolationKind{vioEffectUnlanded}},
		{"effect of a failed transfer, while running",
			Effects{Landed: landed(), Applied: both("w2/x1")[:1]}, []ViolationKind{vioEffectUnlanded}},
		{"landed, never applied on one receiver",
			Effects{Landed: landed("w0/x1"), Applied: both("w0/x1")[1:], Final: true}, []ViolationKind{vioEffectLost}},
		{"landed, not yet applied, while running: not counted",
			Effects{Landed: landed("w0/x1"), Applied: both("w0/x1")[1:]}, nil},
		{"acknowledged, not in PostgreSQL",
			Effects{Landed: landed(), Final: true}, []ViolationKind{vioEffectAcked}},
		{"phantom: no such transfer",
			Effects{Landed: landed("w0/x1"), Applied: append(both("w0/x1"), both("zz")[0]), Final: true}, []ViolationKind{vioPhantom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []ViolationKind
			vs := CheckEffects(atts, &tt.st)
			for _, v := range vs {
				got = append(got, v.Kind)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("CheckEffects: got %v, want %v: %v", got, tt.want, vs)
			}
		})
	}
}

// The control is caught by an effect of a transfer that did not land, or
// one applied twice, and by nothing else.
func TestEffectsWorkloadUncaught(t *testing.T) {
	res := ResourceName(ResEffects, "a")
	for _, tt := range []struct {
		kind   ViolationKind
		caught bool
	}{{vioEffectUnlanded, true}, {vioEffectTwice, true}, {vioEffectLost, false}, {vioEffectAcked, false}} {
		missed := EffectsWorkload.Uncaught([]Violation{vio(res, tt.kind, "")}, false)
		if got := len(missed) == 0; got != tt.caught {
			t.Errorf("%s: caught %v, want %v", tt.kind, got, tt.caught)
		}
	}
}
