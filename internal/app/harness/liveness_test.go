package harness

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// A freeze is three leases and 2 s, and only a fenced run's pause is one;
// the bank's short runs freeze one pause in two; its liveness control is
// a fenced run without preemption that pauses only, every pause a freeze.
func TestLivenessConfig(t *testing.T) {
	cfg := Short(1)
	cfg.SetKind(KindBank)
	if cfg.Freeze != 5*time.Second || cfg.FreezeOneIn != 2 {
		t.Fatalf("bank: got Freeze %v one in %d, want 5s one in 2", cfg.Freeze, cfg.FreezeOneIn)
	}
	lc := LivenessControl(cfg, time.Minute)
	if lc.Freeze != 5*time.Second || lc.FreezeOneIn != 1 {
		t.Fatalf("liveness control: got Freeze %v one in %d, want 5s one in 1", lc.Freeze, lc.FreezeOneIn)
	}
	if err := lc.validate(); err != nil {
		t.Fatal(err)
	}
	if !lc.Fenced || !lc.WithoutPreemption || !lc.UntilStalled || lc.FreezeOneIn != 1 || lc.MaxDuration != time.Minute {
		t.Errorf("got %+v, want a fenced run without preemption, until stalled, every pause a freeze, capped at 1m", lc)
	}
	for k, n := range lc.Until.Faults {
		if want := map[bool]int{true: 2, false: 0}[k == check.FaultPause]; n != want {
			t.Errorf("liveness control: %d %s faults, want %d", n, k, want)
		}
	}
	bad := lc
	bad.FreezeOneIn = 0
	if bad.validate() == nil {
		t.Error("Freeze set, FreezeOneIn 0: validate passed, want an error")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		name   string
		cfg    Config
		freeze bool
	}{
		{"the liveness control", lc, true},
		{"the bank's safety control", func() Config { c := lc; c.Fenced = false; return c }(), false},
		{"no freeze set", Short(1), false},
	} {
		n := &nemesis{cfg: &tt.cfg}
		for range 20 {
			d, detail := n.pauseFor(rng)
			if got := d == tt.cfg.Freeze && detail != ""; got != tt.freeze {
				t.Fatalf("%s: a pause of %v (%q), want a freeze: %v", tt.name, d, detail, tt.freeze)
			}
		}
	}
}
