package harness

import (
	"testing"

	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// A bank transfer counts as a possible lost update when it overlapped
// another acknowledged transfer of one of its accounts on the same store;
// not when they followed each other, shared no account, or ran on two
// stores.
func TestBankEstimate(t *testing.T) {
	h := newHistory(bankWorkload{})
	ok := func(res check.ResKind, from, to string, call, ret int64) {
		h.add(check.Event{Ev: check.EvDone, Outcome: check.OutOK, Res: res, Call: call, Time: ret,
			Transfer: &check.Transfer{ID: "x", From: from, To: to, Amount: 1, Acked: 2, Tried: 2}})
	}
	ok(check.ResBankPG, "a", "b", 0, 10)
	ok(check.ResBankPG, "b", "c", 10, 20)   // after it
	ok(check.ResBankPG, "d", "e", 15, 24)   // no account shared
	ok(check.ResBankEtcd, "c", "a", 12, 18) // another store
	if got := h.progress().Landed; len(got) != 0 {
		t.Fatalf("landed: got %v, want none", got)
	}
	if got := h.lacking(false); len(got) != 1 || got[0] != check.ResBankPG {
		t.Fatalf("lacking (control): got %v, want [%s]", got, check.ResBankPG)
	}
	ok(check.ResBankPG, "c", "a", 25, 40) // a paused transfer of c, returned after 30
	ok(check.ResBankPG, "e", "c", 28, 35) // overlapped it on c
	if p := h.progress(); p.Landed[check.ResBankPG] != 1 || len(p.Landed) != 1 {
		t.Fatalf("landed: got %v, want bank-pg 1", p.Landed)
	}
	if got := h.lacking(false); len(got) != 0 {
		t.Fatalf("lacking (control): got %v, want none", got)
	}
}
