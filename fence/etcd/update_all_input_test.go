package etcdfence_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
)

// noIO is a clientv3.KV that fails the test on any request.
type noIO struct {
	clientv3.KV
	t *testing.T
}

func (k noIO) Txn(context.Context) clientv3.Txn {
	k.t.Fatal("a transaction was started for bad input")
	return nil
}

type nilClaimer struct{}

func (*nilClaimer) Claims() []fence.Claim { return nil }

// UpdateAll's bad input is refused before any I/O.
func TestUpdateAllBadInput(t *testing.T) {
	s := mustNew(t, noIO{t: t}, "/p/")
	fn := transfer("a", "b", 1)
	var many []fence.Claim
	for i := range etcdfence.MaxUpdateAllKeys + 1 {
		many = append(many, fence.Claim{Resource: strconv.Itoa(i), Token: 1})
	}
	var zero etcdfence.Store
	huge := func(map[string]fence.Record) (map[string][]byte, error) {
		return map[string][]byte{"a": make([]byte, 2<<20)}, nil
	}
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"no claims", s.UpdateAll(t.Context(), nil, fn), fence.ErrInvalidArgument},
		{"one key, two tokens", s.UpdateAll(t.Context(), []fence.Claim{{Resource: "a", Token: 1}, {Resource: "a", Token: 2}}, fn), fence.ErrInvalidArgument},
		{"zero token", s.UpdateAll(t.Context(), both(0), fn), fence.ErrInvalidToken},
		{"nil function", s.UpdateAll(t.Context(), both(1), nil), fence.ErrInvalidArgument},
		{"more than MaxUpdateAllKeys", s.UpdateAll(t.Context(), many, fn), etcdfence.ErrInvalidArgument},
		{"nil holder", s.UpdateHeld(t.Context(), nil, fn), fence.ErrInvalidArgument},
		{"typed nil holder", s.UpdateHeld(t.Context(), (*nilClaimer)(nil), fn), fence.ErrInvalidArgument},
		{"zero Store", zero.UpdateAll(t.Context(), both(1), fn), etcdfence.ErrInvalidArgument},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	// Values too large for one request are refused after fn, before the write.
	live := mustNew(t, etcdClient(t), prefix(t))
	if err := live.UpdateAll(t.Context(), both(1), huge); !errors.Is(err, etcdfence.ErrValueTooLarge) {
		t.Fatalf("UpdateAll of a 2 MiB value: got %v, want an error matching ErrValueTooLarge", err)
	}
	if _, err := live.Get(t.Context(), "a"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after the refused UpdateAll: got %v, want ErrNotFound", err)
	}
}

// UpdateHeld with an *etcdlock.MultiLock: its claims while it holds the
// locks, each key with its own lock's token; ErrLockLost, nothing sent,
// once it was unlocked.
func TestUpdateHeldMultiLock(t *testing.T) {
	cli := etcdClient(t)
	locks, err := etcdlock.New(cli, etcdlock.WithPrefix(prefix(t)+"locks/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close(context.WithoutCancel(t.Context())) })
	s := mustNew(t, cli, prefix(t))
	mustPut(t, s, "a", 1, "100")
	mustPut(t, s, "b", 1, "100")
	m, err := locks.LockAll(t.Context(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateHeld(t.Context(), m, transfer("a", "b", 10)); err != nil {
		t.Fatalf("UpdateHeld while holding both locks: got %v, want nil", err)
	}
	wantRecord(t, s, "a", int64(m.Lock("a").Token()), "90")
	wantRecord(t, s, "b", int64(m.Lock("b").Token()), "110")
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateHeld(t.Context(), m, transfer("a", "b", 10)); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("UpdateHeld after Unlock: got %v, want an error matching fence.ErrLockLost", err)
	}
	wantRecord(t, s, "a", int64(m.Lock("a").Token()), "90")
}

// UpdateAll works at its documented limit, MaxUpdateAllKeys fresh keys,
// each written: the claim's raise (64 Puts and 64 Gets) and the write (128
// compares) are each at etcd's default --max-txn-ops.
func TestUpdateAllAtMaxKeys(t *testing.T) {
	s := newStore(t)
	var claims []fence.Claim
	for i := range etcdfence.MaxUpdateAllKeys {
		claims = append(claims, fence.Claim{Resource: "k" + strconv.Itoa(i), Token: 3})
	}
	err := s.UpdateAll(t.Context(), claims, func(old map[string]fence.Record) (map[string][]byte, error) {
		next := make(map[string][]byte, len(old))
		for k := range old {
			next[k] = []byte("v")
		}
		return next, nil
	})
	if err != nil {
		t.Fatalf("UpdateAll of MaxUpdateAllKeys (%d) keys: %v", etcdfence.MaxUpdateAllKeys, err)
	}
	wantRecord(t, s, claims[len(claims)-1].Resource, 3, "v")
}
