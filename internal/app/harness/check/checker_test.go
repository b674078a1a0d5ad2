package check

import (
	"math"
	"testing"
)

// w is a write attempt on row:k from call to ret with token tok.
func w(val string, tok, call, ret int64, out Outcome) Attempt {
	return Attempt{Res: ResRow, Key: "k", Worker: val, Token: tok, Value: val, Call: call, Return: ret, Outcome: out}
}

// rd is a read of row:k that saw val.
func rd(val string, call, ret int64) Attempt {
	return Attempt{Res: ResRow, Key: "k", Value: val, Call: call, Return: ret, Outcome: OutOK, Read: true}
}

func stored(final string, recs ...Record) *Storage {
	st := NewStorage()
	st.Writes["row:k"], st.Final["row:k"] = recs, final
	return st
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		atts  []Attempt
		st    *Storage
		kinds []ViolationKind
	}{
		{"fenced: the paused holder's write is refused",
			[]Attempt{w("a", 1, 0, 100, OutStale), w("b", 2, 10, 20, OutOK), rd("b", 110, 120)},
			stored("b", Record{2, "b"}), nil},
		{"unknown outcome, landed or not",
			[]Attempt{w("a", 1, 0, math.MaxInt64, OutUnknown), w("b", 2, 10, 20, OutError), w("c", 3, 30, 40, OutOK)},
			stored("c", Record{1, "a"}, Record{3, "c"}), nil},
		{"control: the paused holder's write lands after the newer one",
			[]Attempt{w("a", 1, 0, 100, OutOK), w("b", 2, 10, 20, OutOK), rd("a", 110, 120)},
			stored("a", Record{2, "b"}, Record{1, "a"}), []ViolationKind{vioTokenOrder, vioLinearizable}},
		{"acknowledged write missing",
			[]Attempt{w("a", 1, 0, 10, OutOK), w("b", 2, 20, 30, OutOK)},
			stored("a", Record{1, "a"}), []ViolationKind{vioLost, vioLinearizable}},
		{"refused write present",
			[]Attempt{w("a", 2, 0, 10, OutOK), w("b", 1, 20, 30, OutStale)},
			stored("a", Record{2, "a"}, Record{1, "b"}), []ViolationKind{vioTokenOrder, vioRefusedLand}},
		{"a value nobody wrote",
			[]Attempt{w("a", 1, 0, 10, OutOK)},
			stored("a", Record{1, "a"}, Record{1, "zz"}), []ViolationKind{vioPhantom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := Check(tt.atts, tt.st)
			var got []ViolationKind
			for _, v := range vs {
				got = append(got, v.Kind)
			}
			if len(got) != len(tt.kinds) {
				t.Fatalf("violations: got %v, want %v", vs, tt.kinds)
			}
			for i := range got {
				if got[i] != tt.kinds[i] {
					t.Fatalf("violations: got %v, want %v", vs, tt.kinds)
				}
			}
		})
	}
}

// The etcd and SQLite histories are checked as the others are: a stale
// write that landed after a newer token's (the control's plain Put, or
// plain upsert, of a paused holder) is a token-order violation in etcd's
// mod-revision order and in the SQLite log's, and the register it leaves
// is not linearizable; the same attempts with the stale write refused and
// absent from storage are clean.
func TestCheckEtcdAndSQLHistories(t *testing.T) {
	for _, res := range []ResKind{ResEtcd, ResSQL} {
		on := func(a Attempt) Attempt { a.Res = res; return a }
		name := ResourceName(res, "k")
		tests := []struct {
			name  string
			atts  []Attempt
			recs  []Record
			final string
			kinds []ViolationKind
		}{
			{"stale write landed", []Attempt{
				on(w("w0/t1/s1", 1, 0, 10, OutOK)),
				on(w("w0/t1/s2", 1, 20, 500, OutOK)), // paused past its lease
				on(w("w1/t2/s1", 2, 100, 110, OutOK)),
			}, []Record{{1, "w0/t1/s1"}, {2, "w1/t2/s1"}, {1, "w0/t1/s2"}}, "w0/t1/s2",
				[]ViolationKind{vioTokenOrder, vioLinearizable}},
			{"stale write refused", []Attempt{
				on(w("w0/t1/s1", 1, 0, 10, OutOK)),
				on(w("w0/t1/s2", 1, 20, 500, OutStale)),
				on(w("w1/t2/s1", 2, 100, 110, OutOK)),
			}, []Record{{1, "w0/t1/s1"}, {2, "w1/t2/s1"}}, "w1/t2/s1", nil},
		}
		for _, tt := range tests {
			t.Run(string(res)+"/"+tt.name, func(t *testing.T) {
				st := NewStorage()
				st.Writes[name], st.Final[name] = tt.recs, tt.final
				vs := Check(tt.atts, st)
				if len(vs) != len(tt.kinds) {
					t.Fatalf("violations: got %v, want %v", vs, tt.kinds)
				}
				for i, v := range vs {
					if v.Kind != tt.kinds[i] || v.Resource != name {
						t.Fatalf("violation %d: got %v, want %s on %s", i, v, tt.kinds[i], name)
					}
				}
			})
		}
	}
}
