package main

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// The bump check prints clears the token when added to any snapshot's
// revision, also when the cluster checked was itself restored with a bump
// (its revision far past the snapshot's). Found by following restore.md
// by hand twice: the second restore, of the same snapshot with the bump
// check printed (the gap to the bumped revision, plus a million), would
// have handed out tokens the resource had already accepted.
func TestRestoreBumpClearsTokenFromAnySnapshot(t *testing.T) {
	for _, tok := range []fence.Token{1, 812, 1_000_000_005, 1 << 40} {
		for _, snapRev := range []int64{1, 4, 1_000_000_004} {
			if got := restoreBump(tok) + snapRev; got <= int64(tok) {
				t.Errorf("token %d, snapshot at revision %d: a bump of %d restores to %d, not past the token", tok, snapRev, restoreBump(tok), got)
			}
		}
	}
}
