package filepairs_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/filepairs"
)

// maxEtcdlockPairs is issue 48's goal for etcdlock: at most 12 pairs of
// files that each use a name of the other.
const maxEtcdlockPairs = 24

// TestEtcdlockPairs holds etcdlock's two-way pairs of files to their
// budget; go run ./internal/testkit/filepairs/pairs -v ./etcdlock lists them.
func TestEtcdlockPairs(t *testing.T) {
	g, err := filepairs.Load("github.com/fencelock/fencelock/etcdlock")
	if err != nil {
		t.Fatal(err)
	}
	ps := g.Pairs()
	for _, p := range ps {
		t.Logf("%s <-> %s: %v / %v", p.A, p.B, p.AtoB, p.BtoA)
	}
	if len(ps) > maxEtcdlockPairs {
		t.Errorf("etcdlock has %d two-way pairs of files, more than its budget of %d (listed above)", len(ps), maxEtcdlockPairs)
	}
}

// TestCounts is the control: a package with one two-way pair (a.go and
// b.go) and a one-way use (c.go of b.go) counts one pair, and a field
// counts as a use of the file that declares it.
func TestCounts(t *testing.T) {
	g, err := filepairs.Load("./testdata/cycle")
	if err != nil {
		t.Fatal(err)
	}
	ps := g.Pairs()
	if len(ps) != 1 || ps[0].A != "a.go" || ps[0].B != "b.go" {
		t.Fatalf("pairs = %+v, want a.go <-> b.go only", ps)
	}
	if got := g["c.go"]["b.go"]; len(got) != 2 || got[0] != "f" || got[1] != "t" {
		t.Errorf("c.go uses of b.go = %v, want [f t]", got)
	}
	if g.Arrows() != 3 {
		t.Errorf("arrows = %d, want 3 (a->b, b->a, c->b)", g.Arrows())
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
