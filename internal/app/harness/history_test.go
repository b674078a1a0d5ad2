package harness

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// A write counts as landed stale when a higher token's write to the same
// resource had returned before it; not when it returned earlier, nor on
// another resource.
func TestHistoryLanded(t *testing.T) {
	h := newHistory(registerWorkload{})
	ok := func(key string, res check.ResKind, tok, at int64) {
		h.add(check.Event{Ev: check.EvDone, Outcome: check.OutOK, Key: key, Res: res, Token: tok, Time: at})
	}
	ok("k", check.ResRow, 5, 10)
	ok("k", check.ResRow, 6, 20)
	ok("k", check.ResRow, 4, 15) // returned before 6 did: may have landed first
	ok("k", check.ResS3, 3, 40)  // another resource
	ok("j", check.ResRow, 1, 50) // another key
	if got := h.progress().Landed; len(got) != 0 {
		t.Fatalf("landed: got %v, want none", got)
	}
	ok("k", check.ResRow, 5, 30)
	h.add(check.Event{Ev: check.EvDone, Outcome: check.OutStale, Key: "k", Res: check.ResRow, Token: 5, Time: 31})
	ok("k", check.ResSQL, 9, 60)
	ok("k", check.ResSQL, 8, 70)
	if p := h.progress(); p.Landed[check.ResRow] != 1 || p.Landed[check.ResSQL] != 1 || len(p.Landed) != 2 || p.Refused != 1 {
		t.Fatalf("landed, refused: got %v, %d, want row 1 and sql 1, 1", p.Landed, p.Refused)
	}
}
