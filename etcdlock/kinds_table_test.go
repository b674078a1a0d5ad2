package etcdlock

import (
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Every kind has a complete row in the one kind table, and no two kinds
// share a name (the fencelock.kind attribute tells them apart) or, but a
// lock and its readers, a key space.
func TestKindTable(t *testing.T) {
	names := map[string]kind{}
	queues := map[string]kind{}
	p := layout("/p/")
	for k := range numKinds {
		row := kindTable[k]
		if row.name == "" || row.ended == nil || row.queue == nil || row.waitSpan == "" || row.trySpan == "" || row.releaseSpan == "" ||
			row.space == nil || row.space.seg == "" || row.space.kind == "" {
			t.Errorf("kind %d: incomplete row %+v", k, row)
			continue
		}
		if other, ok := names[row.name]; ok {
			t.Errorf("kinds %d and %d are both named %q", other, k, row.name)
		}
		names[row.name] = k
		q := row.queue(p, "n")
		if !strings.HasPrefix(q, p.space(row.space.seg)) || !slices.Contains(layoutSegments, row.space.seg) {
			t.Errorf("kind %d: queue %q, want one in its key space %q, a layout segment", k, q, row.space.seg)
		}
		if other, ok := queues[q]; ok && !(row.reader && other == kindLock) {
			t.Errorf("kinds %d and %d both queue under %q", other, k, q)
		}
		queues[q] = k
	}
}

// The key spaces that kindTable's rows point to differ in segment and in
// kind, and the read side shows each: a Status has a section per space,
// in order, and List takes each kind.
func TestKeySpaces(t *testing.T) {
	segs, kinds := map[string]bool{}, map[string]bool{}
	for _, sp := range keySpaces {
		if segs[sp.seg] || kinds[sp.kind] || sp.seg == spaceLane {
			t.Errorf("key space %+v: its segment or kind repeats another's", *sp)
		}
		segs[sp.seg], kinds[sp.kind] = true, true
		if spaceOf(sp.kind) != sp {
			t.Errorf("spaceOf(%q) = %v, want %v", sp.kind, spaceOf(sp.kind), sp)
		}
	}
	st := layout("/p/").statusOf(StatusScope{Names: []string{"n"}}, nil, 1, nil)
	var got []string
	for _, sec := range st.Sections {
		got = append(got, sec.Kind)
		if len(sec.Names) != 1 || sec.Names[0].Value == nil || !sec.Names[0].Value.Empty() {
			t.Errorf("section %q of a name with no key: %+v, want the name, empty", sec.Kind, sec.Names)
		}
	}
	if !slices.Equal(got, Kinds()) {
		t.Errorf("the sections' kinds: got %q, want %q", got, Kinds())
	}
}

// entitled is the rule a waiter waits on, applied to a whole queue: a key
// holds when fewer than need of its blockers come before it; a reader's
// blockers are the writers.
func TestEntitled(t *testing.T) {
	for _, tt := range []struct {
		queue string // w: a writer's key, r: a reader's, in arrival order
		need  int
		want  int
	}{
		{"", 1, 0},
		{"w", 1, 1},
		{"ww", 1, 1},
		{"rrr", 1, 3},
		{"rrwr", 1, 2},
		{"wr", 1, 1},
		{"rwr", 1, 1},
		{"www", 3, 3},
		{"wwwww", 3, 3},
		{"w", 0, 0}, // a semaphore whose permits no record says
	} {
		var kvs []*mvccpb.KeyValue
		for i, c := range tt.queue {
			kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(queueKey("/p/lock/n/", c == 'r', "1a", i)), CreateRevision: int64(i + 1)})
		}
		if got := entitled(kvs, tt.need); got != tt.want {
			t.Errorf("entitled(%q, %d) = %d, want %d", tt.queue, tt.need, got, tt.want)
		}
	}
	if !strings.HasPrefix(queueKey("/p/lock/n/", true, "1a", 0), readersFrom("/p/lock/n/")) {
		t.Error("a reader's key does not begin where readersFrom says readers begin")
	}
}
