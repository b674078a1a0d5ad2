package etcdfence_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/nilchecktest"
)

func TestNewRefusesBadInput(t *testing.T) {
	cli := etcdClient(t)
	var typedNil *clientv3.Client
	tests := []struct {
		name   string
		kv     clientv3.KV
		prefix string
		opts   []etcdfence.Option
		want   error
	}{
		{"nil client", nil, "/p/", nil, etcdfence.ErrInvalidArgument},
		{"typed nil client", typedNil, "/p/", nil, etcdfence.ErrInvalidArgument},
		{"empty prefix", cli, "", nil, etcdfence.ErrInvalidArgument},
		{"nil option", cli, "/p/", []etcdfence.Option{nil}, etcdfence.ErrInvalidOption},
		{"zero request limit", cli, "/p/", []etcdfence.Option{etcdfence.WithMaxRequestBytes(0)}, etcdfence.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := etcdfence.New(tt.kv, tt.prefix, tt.opts...)
			if s != nil || !errors.Is(err, tt.want) || !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("New: got %v, %v; want nil and an error matching %v and fence.ErrInvalidArgument", s, err, tt.want)
			}
		})
	}
}

// The package's invalid-input errors match its ErrInvalidArgument and
// fence.ErrInvalidArgument, the root of every package's.
func TestInvalidInputMatchesFamily(t *testing.T) {
	for _, err := range []error{etcdfence.ErrInvalidArgument, etcdfence.ErrInvalidOption, etcdfence.ErrValueTooLarge} {
		for _, want := range []error{etcdfence.ErrInvalidArgument, fence.ErrInvalidArgument} {
			if !errors.Is(err, want) {
				t.Errorf("%v: got no match for %v, want one", err, want)
			}
		}
	}
}

func TestNilContext(t *testing.T) {
	s := newStore(t)
	var ctx context.Context // a caller's bug: never a panic
	if err := s.Put(ctx, "k", 1, nil); !errors.Is(err, etcdfence.ErrInvalidArgument) {
		t.Errorf("Put(nil ctx): got %v, want an error matching ErrInvalidArgument", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, etcdfence.ErrInvalidArgument) {
		t.Errorf("Get(nil ctx): got %v, want an error matching ErrInvalidArgument", err)
	}
}

// The keys are those the package documentation gives.
func TestLayout(t *testing.T) {
	cli := etcdClient(t)
	p := prefix(t)
	s := mustNew(t, cli, p)
	mustPut(t, s, "a/b", 42, "hello")
	if got, want := s.FloorKey("a/b"), p+"floor/a/b"; got != want {
		t.Errorf("FloorKey: got %q, want %q", got, want)
	}
	if got, want := s.DataKey("a/b"), p+"data/a/b"; got != want {
		t.Errorf("DataKey: got %q, want %q", got, want)
	}
	if v, _ := rawValue(t, cli, p+"floor/a/b"); v != "0000000000000000042" {
		t.Errorf("floor: got %q, want %q", v, "0000000000000000042")
	}
	if v, _ := rawValue(t, cli, p+"data/a/b"); v != "0000000000000000042hello" {
		t.Errorf("data: got %q, want %q", v, "0000000000000000042hello")
	}
	// Byte-wise order is numeric order: 9 < 10 < 2^63-1.
	mustPut(t, s, "n", 9, "")
	mustPut(t, s, "n", 10, "")
	mustPut(t, s, "n", 1<<63-1, "max")
	fencewant.Stale(t, s.Put(t.Context(), "n", 10, nil), 10, 1<<63-1)
}

func TestDeleteKeepsFloor(t *testing.T) {
	cli := etcdClient(t)
	s := mustNew(t, cli, prefix(t))
	mustPut(t, s, "k", 5, "v5")
	fencewant.Stale(t, s.Delete(t.Context(), "k", 4), 4, 5)
	wantRecord(t, s, "k", 5, "v5")

	if err := s.Delete(t.Context(), "k", 7); err != nil {
		t.Fatalf("Delete(7): got %v, want nil", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want an error matching fence.ErrNotFound", err)
	}
	fencewant.Stale(t, s.Put(t.Context(), "k", 6, []byte("v6")), 6, 7)
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after a stale Put: got %v, want an error matching fence.ErrNotFound", err)
	}
	mustPut(t, s, "k", 7, "v7")
	wantRecord(t, s, "k", 7, "v7")

	// A key never written: Delete sets its floor.
	if err := s.Delete(t.Context(), "new", 3); err != nil {
		t.Fatalf("Delete of a new key: got %v, want nil", err)
	}
	fencewant.Stale(t, s.Put(t.Context(), "new", 2, nil), 2, 3)
	for _, bad := range []fence.Token{0, -1} {
		if err := s.Delete(t.Context(), "k", bad); !errors.Is(err, fence.ErrInvalidToken) {
			t.Errorf("Delete(token %d): got %v, want an error matching fence.ErrInvalidToken", bad, err)
		}
	}
}

// The control for TestDeleteKeepsFloor: deleting the keys themselves, as
// etcdctl del would, lets a stale Put land.
func TestPlainDeleteResetsFloor(t *testing.T) {
	cli := etcdClient(t)
	p := prefix(t)
	s := mustNew(t, cli, p)
	mustPut(t, s, "k", 5, "v5")
	if _, err := cli.Delete(t.Context(), p, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "k", 1, "stale")
	wantRecord(t, s, "k", 1, "stale")
}

func TestValueTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte("x"), etcdfence.DefaultMaxRequestBytes)
	t.Run("refused before I/O", func(t *testing.T) {
		fcli, in := faulty(t)
		s := mustNew(t, fcli, prefix(t))
		err := s.Put(t.Context(), "k", 1, big)
		if !errors.Is(err, etcdfence.ErrValueTooLarge) || !errors.Is(err, fence.ErrInvalidArgument) {
			t.Fatalf("Put of %d bytes: got %v, want an error matching ErrValueTooLarge", len(big), err)
		}
		if n := in.Calls("KV/Txn"); n != 0 {
			t.Fatalf("transactions sent: got %d, want 0", n)
		}
	})
	t.Run("refused by etcd", func(t *testing.T) {
		s := newStore(t, etcdfence.WithMaxRequestBytes(64<<20)) // above the server's limit
		mustPut(t, s, "k", 1, "v1")
		err := s.Put(t.Context(), "k", 2, big)
		if !errors.Is(err, etcdfence.ErrValueTooLarge) || errors.Is(err, fence.ErrUnknownOutcome) {
			t.Fatalf("Put of %d bytes: got %v, want an error matching ErrValueTooLarge, not ErrUnknownOutcome", len(big), err)
		}
		wantRecord(t, s, "k", 1, "v1")
	})
	t.Run("fits", func(t *testing.T) {
		s := newStore(t)
		v := big[:etcdfence.DefaultMaxRequestBytes-1024]
		if err := s.Put(t.Context(), "k", 1, v); err != nil {
			t.Fatalf("Put of %d bytes: got %v, want nil", len(v), err)
		}
	})
}

// Keys under the prefix written by something else are reported, not
// returned as records.
func TestCorrupt(t *testing.T) {
	cli := etcdClient(t)
	s := mustNew(t, cli, prefix(t))
	for _, v := range []string{"short", "000000000000000000xvalue", "0000000000000000000zero token"} {
		if _, err := cli.Put(t.Context(), s.DataKey("k"), v); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(t.Context(), "k"); !errors.Is(err, etcdfence.ErrCorrupt) {
			t.Errorf("Get of data %q: got %v, want an error matching ErrCorrupt", v, err)
		}
	}
	if _, err := cli.Put(t.Context(), s.FloorKey("k"), "not a token"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", 1, nil); !errors.Is(err, etcdfence.ErrCorrupt) {
		t.Errorf("Put against floor %q: got %v, want an error matching ErrCorrupt", "not a token", err)
	}
}

// TestZeroValues: a zero or nil Store, made without New, is refused with an
// error matching ErrInvalidArgument, never a panic.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	var nilStore *etcdfence.Store
	for name, s := range map[string]*etcdfence.Store{"zero": {}, "nil": nilStore} {
		for call, f := range map[string]func() error{
			"Put":    func() error { return s.Put(ctx, "k", 1, []byte("v")) },
			"Delete": func() error { return s.Delete(ctx, "k", 1) },
			"Get":    func() error { _, err := s.Get(ctx, "k"); return err },
			"GetForUpdate": func() error {
				_, err := s.GetForUpdate(ctx, "k", 1)
				return err
			},
			"Update": func() error { return s.Update(ctx, "k", 1, increment) },
		} {
			if err := nilchecktest.NoPanic(f); !errors.Is(err, etcdfence.ErrInvalidArgument) {
				t.Errorf("%s on a %s Store: got %v, want an error matching ErrInvalidArgument", call, name, err)
			}
		}
	}
}
