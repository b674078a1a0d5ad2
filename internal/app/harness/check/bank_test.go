package check

import (
	"slices"
	"testing"
)

// xfer is a transfer of amt from one account to another on store kind,
// with outcome out and legs below acked acknowledged, from tried on not
// applied.
func xfer(kind ResKind, id, from, to string, amt int64, out Outcome, acked, tried int) Attempt {
	return Attempt{Res: kind, Key: from, Value: id, Outcome: out,
		Transfer: &Transfer{ID: id, From: from, To: to, Amount: amt, Acked: acked, Tried: tried}}
}

// ledger is a store holding balances and, per account, operations.
func ledger(bal map[string]int64, ops map[string][]BankOp) *Ledger {
	return &Ledger{Balance: bal, Ops: ops}
}

// logged is a PostgreSQL ledger as the harness reads it: balances, and
// two operations per transfer of the log.
func logged(bal map[string]int64, log ...Attempt) *Ledger {
	l := ledger(bal, map[string][]BankOp{})
	for _, a := range log {
		t := a.Transfer
		l.Ops[t.From] = append(l.Ops[t.From], BankOp{t.ID, -t.Amount})
		l.Ops[t.To] = append(l.Ops[t.To], BankOp{t.ID, t.Amount})
	}
	return l
}

func TestCheckBank(t *testing.T) {
	pg := func(id, from, to string, amt int64, out Outcome) Attempt {
		switch out { // one transaction: both legs or none
		case OutOK:
			return xfer(ResBankPG, id, from, to, amt, out, 2, 2)
		case OutStale, OutLost:
			return xfer(ResBankPG, id, from, to, amt, out, 0, 0)
		}
		return xfer(ResBankPG, id, from, to, amt, out, 0, 2)
	}
	t1, t2 := pg("w0/x1", "a", "b", 50, OutOK), pg("w1/x1", "a", "c", 10, OutOK)
	kv := func(id, from, to string, amt int64, out Outcome, acked, tried int) Attempt {
		return xfer(ResBankEtcd, id, from, to, amt, out, acked, tried)
	}
	tests := []struct {
		name    string
		atts    []Attempt
		ledgers map[ResKind]*Ledger
		want    []ViolationKind // in order
	}{
		{"clean: acknowledged, refused and unknown transfers, and a half-applied one",
			[]Attempt{t1, t2, pg("w2/x1", "b", "c", 5, OutStale), pg("w3/x1", "c", "a", 7, OutUnknown),
				kv("w0/x1", "a", "b", 50, OutOK, 2, 2),
				kv("w1/x1", "a", "c", 10, OutStale, 1, 1),  // refused at its credit
				kv("w3/x1", "c", "a", 7, OutUnknown, 0, 2), // no answer: its debit landed
				kv("w2/x1", "b", "c", 5, OutUnknown, 0, 2)},
			map[ResKind]*Ledger{
				ResBankPG: logged(map[string]int64{"a": 47, "b": 150, "c": 103}, t1, t2, pg("w3/x1", "c", "a", 7, OutUnknown)),
				ResBankEtcd: ledger(map[string]int64{"a": 40, "b": 150, "c": 93}, map[string][]BankOp{
					"a": {{"w0/x1", -50}, {"w1/x1", -10}}, "b": {{"w0/x1", 50}}, "c": {{"w3/x1", -7}}}),
			}, nil},
		{"lost update: the newer holder's stale read overwrites the older's transfer",
			[]Attempt{t1, pg("w1/x1", "a", "b", 10, OutOK)},
			map[ResKind]*Ledger{ResBankPG: logged(map[string]int64{"a": 90, "b": 110, "c": 100}, t1, pg("w1/x1", "a", "b", 10, OutOK))},
			[]ViolationKind{vioBankBalance, vioBankBalance}},
		{"money created: a stale read of a, transfers to b and c",
			[]Attempt{t1, t2},
			map[ResKind]*Ledger{ResBankPG: logged(map[string]int64{"a": 90, "b": 150, "c": 110}, t1, t2)},
			[]ViolationKind{vioBankBalance, vioBankTotal}},
		{"acknowledged transfer missing from an account",
			[]Attempt{kv("w0/x1", "a", "b", 50, OutOK, 2, 2)},
			map[ResKind]*Ledger{ResBankEtcd: ledger(map[string]int64{"a": 50, "b": 100}, map[string][]BankOp{"a": {{"w0/x1", -50}}})},
			[]ViolationKind{vioBankLost}},
		{"an operation applied twice",
			[]Attempt{kv("w0/x1", "a", "b", 50, OutOK, 2, 2)},
			map[ResKind]*Ledger{ResBankEtcd: ledger(map[string]int64{"a": 0, "b": 150}, map[string][]BankOp{
				"a": {{"w0/x1", -50}, {"w0/x1", -50}}, "b": {{"w0/x1", 50}}})},
			[]ViolationKind{vioBankTwice, vioBankTotal}},
		{"a balance off its log: money not conserved",
			[]Attempt{t1},
			map[ResKind]*Ledger{ResBankPG: logged(map[string]int64{"a": 50, "b": 160}, t1)},
			[]ViolationKind{vioBankBalance, vioBankTotal}},
		{"a refused transfer applied",
			[]Attempt{pg("w0/x1", "a", "b", 50, OutStale)},
			map[ResKind]*Ledger{ResBankPG: logged(map[string]int64{"a": 50, "b": 150}, t1)},
			[]ViolationKind{vioRefusedLand, vioRefusedLand}},
		{"an operation no transfer made",
			nil,
			map[ResKind]*Ledger{ResBankS3: ledger(map[string]int64{"a": 50}, map[string][]BankOp{"a": {{"zz", -50}}})},
			[]ViolationKind{vioPhantom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := CheckBank(tt.atts, tt.ledgers)
			var got []ViolationKind
			for _, v := range vs {
				got = append(got, v.Kind)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("violations: got %v, want kinds %v", vs, tt.want)
			}
		})
	}
}

// The bank's control must lose money on PostgreSQL; what it catches on
// the KV stores is reported, not required. A refused transfer that landed
// is no money lost by the control's code.
func TestBankUncaught(t *testing.T) {
	on := func(kind ResKind, v ViolationKind) Violation { return vio(ResourceName(kind, "a"), v, "") }
	tests := []struct {
		name string
		vs   []Violation
		want []ResKind
	}{
		{"lost on PostgreSQL", []Violation{on(ResBankPG, vioBankBalance)}, nil},
		{"a total off on PostgreSQL", []Violation{on(ResBankPG, vioBankTotal)}, nil},
		{"lost on the KV stores only", []Violation{on(ResBankEtcd, vioBankLost), on(ResBankS3, vioBankBalance)}, []ResKind{ResBankPG}},
		{"refused landed on PostgreSQL", []Violation{on(ResBankPG, vioRefusedLand)}, []ResKind{ResBankPG}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, soFar := range []bool{false, true} {
				if got := Bank.Uncaught(tt.vs, soFar); !slices.Equal(got, tt.want) {
					t.Errorf("Uncaught(soFar %v): got %v, want %v", soFar, got, tt.want)
				}
			}
		})
	}
}
