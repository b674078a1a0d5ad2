package etcdfence_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// sameTokenCases runs the same-token protection against the etcd at eps,
// through clients logged in as user (none when empty): a copy of a write
// after the next write of its token is refused, a write turned back by
// another holder's write of its token is sent again and lands.
func sameTokenCases(t *testing.T, eps []string, user, p string) {
	fcli, in := faultyAt(t, eps, user)
	direct, _ := faultyAt(t, eps, user)
	s, other := mustNew(t, fcli, p), mustNew(t, direct, p)
	mustPut(t, s, "k", 2, "v1")
	sent := capture(in, s.DataKey("k"))
	mustPut(t, s, "k", 2, "v2")
	mustPut(t, s, "k", 2, "v3")
	wantRefusedBy(t, resend(t, direct, <-sent), 2)
	wantRecord(t, other, "k", 2, "v3")
	// a copy of a Delete after a Put of its token
	sentDel := capture(in, s.FloorKey("d"))
	if err := s.Delete(t.Context(), "d", 2); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "d", 2, "after delete")
	resend(t, direct, <-sentDel)
	wantRecord(t, other, "d", 2, "after delete")
	// another holder of the token
	mustPut(t, other, "k", 2, "from other")
	before := in.Calls("KV/Txn")
	mustPut(t, s, "k", 2, "from s")
	if got := in.Calls("KV/Txn") - before; got != 2 {
		t.Errorf("transactions of s's Put after other's: got %d, want 2", got)
	}
	wantRecord(t, other, "k", 2, "from s")
	// a higher token still fences
	mustPut(t, other, "k", 3, "t3")
	if err := s.Put(t.Context(), "k", 2, []byte("stale")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Put with token 2 after 3: got %v, want ErrStale", err)
	}
	// the second form's compare, Value(floor) < token+"\x00", refuses a
	// corrupt floor of the token with a byte below '0' after it
	// (TestCorruptFloorTokenPrefixSecondForm)
	mustPut(t, s, "c", 2, "v1")
	if _, err := direct.Put(t.Context(), s.FloorKey("c"), "0000000000000000002 "); err != nil {
		t.Fatal(err)
	}
	wantRecord(t, s, "c", 2, "v1") // s sees the corruption's revision
	if err := s.Put(t.Context(), "c", 2, []byte("v2")); !errors.Is(err, etcdfence.ErrCorrupt) {
		t.Errorf("Put against floor %q: got %v, want ErrCorrupt", "0000000000000000002 ", err)
	}
	wantRecord(t, other, "c", 2, "v1")
}

// The same-token compare, the floor's mod revision, on etcd 3.4, 3.5 and 3.6.
func TestSameTokenOtherVersions(t *testing.T) {
	testenv.Long(t, "starts etcd 3.4, 3.5 and 3.6: a few seconds")
	otheretcd.ForEach(t, func(t *testing.T, endpoint string) {
		sameTokenCases(t, []string{endpoint}, "", prefix(t))
	})
}

// The same-token compare with auth on, for a user whose role may
// read and write the Store's prefix only; one that may only read it is
// refused, nothing written.
func TestSameTokenAuth(t *testing.T) {
	testenv.Long(t, "starts an etcd member of its own, with auth on: about 1 s")
	p := "/app/"
	eps := authEtcd(t, p, map[string]clientv3.PermissionType{
		"writer": clientv3.PermissionType(clientv3.PermReadWrite),
		"reader": clientv3.PermissionType(clientv3.PermRead),
	})
	sameTokenCases(t, eps, "writer", p)
	rcli, _ := faultyAt(t, eps, "reader")
	r := mustNew(t, rcli, p)
	err := r.Put(context.Background(), "k", 3, []byte("by reader"))
	if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
		t.Errorf("reader's Put: got %v, want etcd's refusal", err)
	}
	wcli, _ := faultyAt(t, eps, "writer")
	wantRecord(t, mustNew(t, wcli, p), "k", 3, "t3")
}
