package s3fence_test

import (
	"testing"

	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestRequestsPerPut counts what each Put sends: a holder's repeated writes
// to a key are one conditional PUT each; a key the store has not seen, or
// has forgotten, costs a ranged GET first.
func TestRequestsPerPut(t *testing.T) {
	tests := []struct {
		name     string
		opts     []s3fence.Option
		writes   []string // keys, in order, written with token 3
		wantGets int
	}{
		{"one key", nil, []string{"a", "a", "a"}, 1},
		{"cache disabled", []s3fence.Option{s3fence.WithCacheSize(0)}, []string{"a", "a", "a"}, 3},
		{"cache of one", []s3fence.Option{s3fence.WithCacheSize(1)}, []string{"a", "b", "a", "a"}, 3},
		{"cache of two", []s3fence.Option{s3fence.WithCacheSize(2)}, []string{"a", "b", "a", "b"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &faults{}
			s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket, tt.opts...)
			prefix := key(t)
			for _, k := range tt.writes {
				mustPut(t, s, prefix+k, 3, "v")
			}
			if gets, puts := f.counts(); gets != tt.wantGets || puts != len(tt.writes) {
				t.Errorf("requests: got %d GETs and %d PUTs, want %d and %d", gets, puts, tt.wantGets, len(tt.writes))
			}
		})
	}
}

// TestGetPrimesTheCache: a read-modify-write costs one GET and one PUT.
func TestGetPrimesTheCache(t *testing.T) {
	k := key(t)
	mustPut(t, newStore(t), k, 3, "v1")
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	r := mustGet(t, s, k)
	mustPut(t, s, k, r.Token, string(r.Value)+"+v2")
	if gets, puts := f.counts(); gets != 1 || puts != 1 {
		t.Errorf("requests: got %d GETs and %d PUTs, want 1 and 1", gets, puts)
	}
	wantRecord(t, s, k, 3, "v1+v2")
}
