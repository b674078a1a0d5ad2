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
