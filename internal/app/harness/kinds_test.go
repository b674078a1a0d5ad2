package harness

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// Every row of the fault table is complete, and both presets want a count
// of every kind: a kind added without its minimums would never be checked.
func TestFaultKindsComplete(t *testing.T) {
	for _, f := range faultKinds {
		if f.how == "" || f.loops < 1 || f.inject == nil || f.short < 1 || f.long < f.short {
			t.Errorf("fault kind %s: how %q, loops %d, inject set %v, short %d, long %d: want all set, 1 <= short <= long",
				f.kind, f.how, f.loops, f.inject != nil, f.short, f.long)
		}
		for name, m := range map[string]check.Minimums{"ShortMinimums": ShortMinimums, "BankMinimums": BankMinimums, "EffectsMinimums": EffectsMinimums} {
			if got := m.Faults[f.kind]; got != f.short {
				t.Errorf("%s.Faults[%s]: got %d, want %d", name, f.kind, got, f.short)
			}
		}
	}
	bank, longBank := Short(1), Long(1)
	bank.SetKind(KindBank)
	longBank.SetKind(KindBank)
	fx, longFx := Short(1), Long(1)
	fx.SetKind(KindEffects)
	longFx.SetKind(KindEffects)
	for name, cfg := range map[string]Config{"short": Short(1), "long": Long(1), "short bank": bank, "long bank": longBank,
		"short effects": fx, "long effects": longFx} {
		if err := cfg.validate(); err != nil {
			t.Errorf("%s preset: %v", name, err)
		}
	}
}

func TestVerdictMinimums(t *testing.T) {
	met := func() *check.Report {
		r := &check.Report{Seed: 7, Fenced: true, Writes: map[check.ResKind]*check.Counts{}, Faults: FaultsEach(20)}
		for _, k := range check.ResKinds {
			r.Writes[k] = &check.Counts{Accepted: 400, Refused: 1}
		}
		return r
	}
	tests := []struct {
		name   string
		change func(*check.Report)
		want   []string // substrings of the reasons, in order; none when nil
	}{
		{"met", func(*check.Report) {}, nil},
		{"one kind short", func(r *check.Report) { r.Faults[faultMember] = 19 }, []string{"19 member faults, want >= 20"}},
		{"capped", func(r *check.Report) { r.Faults[faultPause] = 3; r.Capped = 8 * time.Minute },
			[]string{"3 pause faults", "stopped by its 8m0s cap"}},
		{"capped but met", func(r *check.Report) { r.Capped = 8 * time.Minute }, nil},
		{"nothing refused", func(r *check.Report) {
			for _, c := range r.Writes {
				c.Refused = 0
			}
		}, []string{"0 stale writes refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := met()
			tt.change(r)
			why := check.Verdict(r, nil, ShortMinimums)
			if len(why) != len(tt.want) {
				t.Fatalf("Verdict: got %q, want %d reasons like %q", why, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(why[i], w) {
					t.Errorf("reason %d: got %q, want it to contain %q", i, why[i], w)
				}
			}
		})
	}
}

// A short run writes ShortResKinds, and its control must catch on each of
// them only; a long run writes, and must catch on, every kind, the
// JetStream and Azure ones included, and starts their servers.
func TestPresetResKinds(t *testing.T) {
	for name, tt := range map[string]struct {
		cfg  Config
		want []check.ResKind
	}{
		"short": {Short(1), ShortResKinds},
		"long":  {Long(1), check.ResKinds},
	} {
		wl := workloadOf(tt.cfg).desc()
		if !slices.Equal(wl.Kinds, tt.want) || !slices.Equal(wl.MustCatch, tt.want) {
			t.Errorf("%s: kinds %v, must catch %v; want %v", name, wl.Kinds, wl.MustCatch, tt.want)
		}
		r := &runner{cfg: tt.cfg, wl: workloadOf(tt.cfg)}
		long := slices.Contains(tt.want, check.ResJetStream)
		if r.uses(check.ResJetStream) != long || r.uses(check.ResAzure) != long {
			t.Errorf("%s: uses jetstream %v, azblob %v; want %v", name, r.uses(check.ResJetStream), r.uses(check.ResAzure), long)
		}
	}
	bad := Short(1)
	bad.ResKinds = []check.ResKind{"nosuch"}
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("ResKinds with an unknown kind: got %v, want an error naming it", err)
	}
}
