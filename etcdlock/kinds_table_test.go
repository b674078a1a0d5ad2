package etcdlock

import (
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
		if row.name == "" || row.ended == nil || row.queue == nil || row.waitSpan == "" || row.trySpan == "" || row.releaseSpan == "" {
			t.Errorf("kind %d: incomplete row %+v", k, row)
			continue
		}
		if other, ok := names[row.name]; ok {
			t.Errorf("kinds %d and %d are both named %q", other, k, row.name)
		}
		names[row.name] = k
		q := row.queue(p, "n")
		if other, ok := queues[q]; ok && !(row.reader && other == kindLock) {
			t.Errorf("kinds %d and %d both queue under %q", other, k, q)
		}
		queues[q] = k
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
