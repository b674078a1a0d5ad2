package check

import (
	"fmt"
	"maps"
	"slices"
)

// CheckBank checks the bank workload's transfers against the stores'
// ledgers, store by store in [BankKinds] order, and returns every
// violation. It is a pure function of its arguments. On each store:
//
//   - each account's balance is [BankStart] plus the sum of its
//     operations (for PostgreSQL, the transfers harness_bank_log holds,
//     written in the transaction that moved the money), and no account
//     holds a transfer's operation twice;
//   - every leg a worker saw acknowledged is in its account: an
//     acknowledged transfer is reflected exactly once;
//   - no leg refused or never sent is in its account, and every operation
//     is a leg of a transfer, with its amount;
//   - the balances add up to BankStart per account plus the legs applied
//     whose transfer's other leg is not. A transfer on a KV store is two
//     writes, so one of unknown outcome, or one that failed at its credit,
//     may be half-applied; an acknowledged one may not (the second rule).
//     PostgreSQL's transfers are whole, so there its total is conserved.
//
// A transfer of unknown outcome may be in its accounts or not.
func CheckBank(atts []Attempt, ledgers map[ResKind]*Ledger) []Violation {
	var vs []Violation
	for _, kind := range BankKinds {
		if l := ledgers[kind]; l != nil {
			vs = append(vs, checkLedger(kind, transfersOn(kind, atts), l)...)
		}
	}
	return vs
}

// transfersOn returns the transfers attempted on the store of kind.
func transfersOn(kind ResKind, atts []Attempt) []*Transfer {
	var ts []*Transfer
	for _, a := range atts {
		if a.Res == kind && a.Transfer != nil {
			ts = append(ts, a.Transfer)
		}
	}
	return ts
}

func checkLedger(kind ResKind, ts []*Transfer, l *Ledger) []Violation {
	accounts := slices.Sorted(maps.Keys(l.Balance))
	vs := checkBalances(kind, accounts, l)
	vs = append(vs, checkLegs(kind, ts, l)...)
	return append(vs, checkTotal(kind, accounts, l)...)
}

// checkBalances: each balance is the start plus its operations, each
// applied once.
func checkBalances(kind ResKind, accounts []string, l *Ledger) []Violation {
	var vs []Violation
	for _, acct := range accounts {
		res := ResourceName(kind, acct)
		seen := map[string]bool{}
		want := int64(BankStart)
		for _, op := range l.Ops[acct] {
			if seen[op.ID] {
				vs = append(vs, vio(res, vioBankTwice, fmt.Sprintf("transfer %s applied twice to account %s", op.ID, acct), op.ID))
			}
			seen[op.ID] = true
			want += op.Amount
		}
		if got := l.Balance[acct]; got != want {
			vs = append(vs, vio(res, vioBankBalance, fmt.Sprintf("account %s: balance %d != %d from its log (%d operations)",
				acct, got, want, len(l.Ops[acct]))))
		}
	}
	return vs
}

// checkLegs: what was acknowledged is there, what was refused or never
// sent is not, and nothing is there that no transfer made.
func checkLegs(kind ResKind, ts []*Transfer, l *Ledger) []Violation {
	held := map[string]map[string]int64{} // account -> transfer ID -> amount
	for acct, ops := range l.Ops {
		held[acct] = map[string]int64{}
		for _, op := range ops {
			held[acct][op.ID] = op.Amount
		}
	}
	var vs []Violation
	for _, t := range ts {
		for i := range 2 {
			acct, amt := t.Leg(i)
			got, ok := held[acct][t.ID]
			delete(held[acct], t.ID)
			vs = append(vs, checkLeg(ResourceName(kind, acct), t, i, ok)...)
			if ok && got != amt {
				vs = append(vs, vio(ResourceName(kind, acct), vioPhantom,
					fmt.Sprintf("transfer %s is %+d on account %s, not %+d", t.ID, got, acct, amt), t.ID))
			}
		}
	}
	for _, acct := range slices.Sorted(maps.Keys(held)) {
		for _, id := range slices.Sorted(maps.Keys(held[acct])) {
			vs = append(vs, vio(ResourceName(kind, acct), vioPhantom,
				fmt.Sprintf("operation %s (%+d) on account %s: no transfer made it", id, held[acct][id], acct), id))
		}
	}
	return vs
}

// checkLeg checks whether leg i of t may be in its account (ok says
// whether it is).
func checkLeg(res string, t *Transfer, i int, ok bool) []Violation {
	acct, _ := t.Leg(i)
	switch {
	case i < t.Acked && !ok:
		return []Violation{vio(res, vioBankLost, fmt.Sprintf("lost update: acknowledged transfer %s (%d from %s to %s) missing from account %s",
			t.ID, t.Amount, t.From, t.To, acct), t.ID)}
	case i >= t.Tried && ok:
		return []Violation{vio(res, vioRefusedLand, fmt.Sprintf("transfer %s (%d from %s to %s) refused or never sent, yet applied to account %s",
			t.ID, t.Amount, t.From, t.To, acct), t.ID)}
	}
	return nil
}

// checkTotal: the balances add up to the start plus the legs applied
// whose transfer's other leg is not (the ledger's own operations say
// which: an ID in one account only).
func checkTotal(kind ResKind, accounts []string, l *Ledger) []Violation {
	where := map[string]map[string]bool{} // transfer ID -> accounts holding it
	var total int64
	for _, acct := range accounts {
		total += l.Balance[acct]
		for _, op := range l.Ops[acct] {
			if where[op.ID] == nil {
				where[op.ID] = map[string]bool{}
			}
			where[op.ID][acct] = true
		}
	}
	var half, halves int64
	for _, acct := range accounts {
		for _, op := range l.Ops[acct] {
			if len(where[op.ID]) == 1 {
				half += op.Amount
				halves++
			}
		}
	}
	want := BankStart*int64(len(accounts)) + half
	if total == want {
		return nil
	}
	return []Violation{vio(ResourceName(kind, "total"), vioBankTotal, fmt.Sprintf("%s: balances total %d != %d: %d accounts of %d, %+d from %d half-applied transfers",
		kind, total, want, len(accounts), BankStart, half, halves))}
}
