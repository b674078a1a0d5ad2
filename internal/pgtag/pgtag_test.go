package pgtag_test

import (
	"reflect"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/pgtag"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	h := pgtag.Hash
	tests := []struct {
		tag  string
		want pgtag.Tag
		ok   bool
	}{
		{"fencelock:t=3-7", pgtag.Tag{Lo: 3, Hi: 7, Entries: map[string][]int64{}, Complete: true}, true},
		{"fencelock:t=3-7;" + pgtag.Entry("A", 3) + ";" + pgtag.Entry("B", 7),
			pgtag.Tag{Lo: 3, Hi: 7, Entries: map[string][]int64{h("A"): {3}, h("B"): {7}}, Complete: true}, true},
		{"fencelock:t=3-7;+", pgtag.Tag{Lo: 3, Hi: 7, Entries: map[string][]int64{}}, true},
		{"fencelock:t=3-7;zz:1", pgtag.Tag{Lo: 3, Hi: 7, Entries: map[string][]int64{}}, true},
		{"fencelock:t=9223372036854775807-9223372036854775807",
			pgtag.Tag{Lo: 9223372036854775807, Hi: 9223372036854775807, Entries: map[string][]int64{}, Complete: true}, true},
		{"fencelock:t=7-3", pgtag.Tag{}, false},
		{"fencelock:t=0-3", pgtag.Tag{}, false},
		{"fencelock:t=-3-4", pgtag.Tag{}, false},
		{"fencelock:t=3", pgtag.Tag{}, false},
		{"fencelock:t=3-x", pgtag.Tag{}, false},
		{"fencelock:t=9223372036854775808-9223372036854775808", pgtag.Tag{}, false},
		{"psql", pgtag.Tag{}, false},
		{"", pgtag.Tag{}, false},
	}
	for _, tt := range tests {
		got, ok := pgtag.Parse(tt.tag)
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q): got %+v, %v, want %+v, %v", tt.tag, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEnds(t *testing.T) {
	tag := func(s string) pgtag.Tag {
		t.Helper()
		tg, ok := pgtag.Parse(s)
		if !ok {
			t.Fatalf("Parse(%q): not a tag", s)
		}
		return tg
	}
	w := func(valid func() bool, pairs ...any) pgtag.Waiter {
		w := pgtag.Waiter{Valid: valid}
		for i := 0; i < len(pairs); i += 2 {
			w.Claims = append(w.Claims, pgtag.Claim{Hash: pgtag.Hash(pairs[i].(string)), Token: int64(pairs[i+1].(int))})
		}
		return w
	}
	yes := func() bool { return true }
	e := pgtag.Entry
	tests := []struct {
		name string
		tag  string
		w    pgtag.Waiter
		want bool
	}{
		{"older than all, no entries", "fencelock:t=3-4", w(nil, "A", 10), true},
		{"straddle, older on the shared resource", "fencelock:t=5-50;" + e("A", 5) + ";" + e("B", 50), w(nil, "A", 10), true},
		{"straddle, same token on the shared resource", "fencelock:t=5-50;" + e("A", 10) + ";" + e("B", 50), w(nil, "A", 10), false},
		{"newer on one shared, older on another", "fencelock:t=5-50;" + e("A", 5) + ";" + e("B", 50), w(nil, "A", 10, "B", 20), false},
		{"straddle, entries overflowed", "fencelock:t=5-50;+", w(nil, "A", 10), false},
		{"straddle, overflowed, waiter valid, no token in range", "fencelock:t=5-8;+", w(yes, "A", 10, "C", 60), true},
		{"straddle, overflowed, waiter valid, a token in range", "fencelock:t=5-50;+", w(yes, "A", 10, "C", 60), false},
		{"no shared resource named, not older than all", "fencelock:t=5-50;" + e("Z", 5), w(nil, "A", 10), false},
		{"newer than all", "fencelock:t=20-30;" + e("A", 20), w(nil, "A", 10), false},
	}
	for _, tt := range tests {
		if got := tt.w.Ends(tag(tt.tag)); got != tt.want {
			t.Errorf("%s: Ends: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMerge(t *testing.T) {
	e := pgtag.Entry
	tests := []struct {
		name, cur string
		lo, hi    int64
		entries   string
		want      string
	}{
		{"no tag before", "psql", 5, 5, e("A", 5), "fencelock:t=5-5;" + e("A", 5)},
		{"empty name", "", 3, 9, e("A", 3) + ";" + e("B", 9), "fencelock:t=3-9;" + e("A", 3) + ";" + e("B", 9)},
		{"widens the range, keeps the entries", "fencelock:t=4-6;" + e("A", 4), 2, 2, e("B", 2),
			"fencelock:t=2-6;" + e("A", 4) + ";" + e("B", 2)},
		{"a tag with no entries", "fencelock:t=4-6", 5, 5, e("B", 5), "fencelock:t=4-6;" + e("B", 5)},
		{"entries gave way", "fencelock:t=4-6;+", 9, 9, e("B", 9), "fencelock:t=4-9;+"},
		{"no room for the entry", "fencelock:t=1000000000-1000000004;" + e("A", 1000000000) + ";" + e("B", 1000000004),
			1000000005, 1000000005, e("C", 1000000005), "fencelock:t=1000000000-1000000005;+"},
		{"not a tag: a range that is no range", "fencelock:t=x-7;" + e("A", 3), 5, 5, e("B", 5), "fencelock:t=5-5;" + e("B", 5)},
		{"not a tag: beyond a bigint", "fencelock:t=1-99999999999999999999", 5, 5, e("B", 5), "fencelock:t=5-5;" + e("B", 5)},
	}
	for _, tt := range tests {
		if got := pgtag.Merge(tt.cur, tt.lo, tt.hi, tt.entries); got != tt.want {
			t.Errorf("%s: Merge(%q, %d, %d, %q): got %q, want %q", tt.name, tt.cur, tt.lo, tt.hi, tt.entries, got, tt.want)
		}
	}
}

func TestCovers(t *testing.T) {
	h := pgtag.Hash
	tests := []struct {
		tag   string
		hash  string
		token int64
		want  bool
	}{
		{"fencelock:t=3-7;" + pgtag.Entry("A", 3), h("A"), 3, true},
		{"fencelock:t=3-7;" + pgtag.Entry("A", 3), h("A"), 5, false},
		{"fencelock:t=3-7;" + pgtag.Entry("A", 3), h("B"), 3, false},
		{"fencelock:t=3-7;+", h("B"), 5, true},
		{"fencelock:t=3-7;+", h("B"), 8, false},
		{"fencelock:t=3-7", h("A"), 3, false},
	}
	for _, tt := range tests {
		tag, ok := pgtag.Parse(tt.tag)
		if !ok {
			t.Fatalf("Parse(%q): not a tag", tt.tag)
		}
		if got := tag.Covers(tt.hash, tt.token); got != tt.want {
			t.Errorf("Parse(%q).Covers(%q, %d): got %v, want %v", tt.tag, tt.hash, tt.token, got, tt.want)
		}
	}
}
