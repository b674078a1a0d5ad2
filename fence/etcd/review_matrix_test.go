package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// An earlier write E of token 2 to k by Store a (a Put or a Delete, sent
// in the first form or the second, depending on a's guess and the floor),
// delivered late (held, its caller told ErrUnknownOutcome), twice (a copy
// after its acknowledgement) or with its reply lost (and a copy after),
// never replaces a later acknowledged write L of token 2 (Put, Delete,
// Update, UpdateAll, Outbox.Update, GetForUpdate then Put), made by a, by
// a Store new to the key, or by the Store that set the floor up (whose
// guess and seen may be stale). Every combination: the key holds L's
// result before E's delivery and after it, and E's delivery writes
// nothing. A review of a6e959a's two forms wrote it; it holds. (Without
// the second form's compare of the floor's mod revision, 473 of its
// subtests fail: the controls are TestSameTokenCopyRefused's.)
func TestEarlyWriteNeverReplacesLaterMatrix(t *testing.T) {
	testenv.Long(t, "hundreds of subtests against the shared member: a few seconds")
	setups := []string{
		"no floor, a new",                  // E: first form, lands
		"floor 1 by c, a new",              // E: first form, lands
		"floor 2 by c, a new",              // E: first form refused, second lands
		"a wrote 2",                        // E: second form, lands
		"a wrote 2, then c wrote 2",        // E: second form refused (seen), second again lands
		"a claimed 2 (GetForUpdate)",       // E: second form, lands
		"a wrote 2, floor re-put 1 by c",   // E: second form (guess 2) against a lower floor
		"a wrote 2 with the guess cleared", // E: first form refused, second lands
	}
	deliveries := []string{"late", "twice", "reply lost"}
	earlier := []string{"Put", "Delete"}
	stores := []string{"a", "b (new)", "c"}
	later := []string{"Put", "Delete", "Update", "UpdateAll", "Outbox.Update", "GetForUpdate+Put"}
	for _, setup := range setups {
		for _, d := range deliveries {
			for _, e := range earlier {
				for _, x := range stores {
					for _, l := range later {
						if setup == "a wrote 2 with the guess cleared" && (x != "a" || (l != "Put" && l != "Update")) {
							continue // 4096 keys written first: a few
						}
						t.Run(setup+"/"+d+"/"+e+"/"+x+"/"+l, func(t *testing.T) {
							earlyVsLater(t, setup, d, e, x, l)
						})
					}
				}
			}
		}
	}
}

func earlyVsLater(t *testing.T, setup, delivery, early, store, later string) {
	fcli, in := faulty(t)
	direct := etcdClient(t)
	p := prefix(t)
	a, c := mustNew(t, fcli, p), mustNew(t, etcdClient(t), p)
	mustPut(t, c, "other", 1, "x") // c has seen a revision
	switch setup {
	case "floor 1 by c, a new":
		mustPut(t, c, "k", 1, "v1")
	case "floor 2 by c, a new":
		mustPut(t, c, "k", 2, "v1")
	case "a wrote 2":
		mustPut(t, a, "k", 2, "v1")
	case "a wrote 2, then c wrote 2":
		mustPut(t, a, "k", 2, "v1")
		mustPut(t, c, "k", 2, "v1c")
	case "a claimed 2 (GetForUpdate)":
		mustPut(t, c, "k", 2, "v1")
		if _, err := a.GetForUpdate(t.Context(), "k", 2); err != nil {
			t.Fatal(err)
		}
	case "a wrote 2, floor re-put 1 by c":
		mustPut(t, a, "k", 2, "v1")
		if _, err := direct.Delete(t.Context(), a.FloorKey("k")); err != nil {
			t.Fatal(err)
		}
		mustPut(t, c, "k", 1, "v1c")
		mustPut(t, a, "other2", 1, "x") // a sees past it
	case "a wrote 2 with the guess cleared":
		mustPut(t, a, "k", 2, "v1")
		// a's guesses are dropped at 4096 keys: UpdateAlls of 64 set them.
		for n := range 4096 / etcdfence.MaxUpdateAllKeys {
			claims := make([]fence.Claim, etcdfence.MaxUpdateAllKeys)
			next := make(map[string][]byte, len(claims))
			for i := range claims {
				claims[i] = fence.Claim{Resource: fmt.Sprintf("g%d-%d", n, i), Token: 1}
				next[claims[i].Resource] = nil
			}
			if err := a.UpdateAll(t.Context(), claims, func(map[string]fence.Record) (map[string][]byte, error) { return next, nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// E, and its request(s).
	var (
		mu   sync.Mutex
		reqs []*pb.TxnRequest
		rec  = true
	)
	in.Before(putsKey(a.FloorKey("k")), func(req any) {
		mu.Lock()
		defer mu.Unlock()
		if rec {
			reqs = append(reqs, req.(*pb.TxnRequest))
		}
	})
	write := func(ctx context.Context) error {
		if early == "Put" {
			return a.Put(ctx, "k", 2, []byte("early"))
		}
		return a.Delete(ctx, "k", 2)
	}
	var held *reqfault.Held
	beforeE := in.Calls("KV/Txn")
	switch delivery {
	case "late":
		held = in.Hold(putsKey(a.FloorKey("k")))
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() { got <- write(ctx) }()
		<-held.Caught()
		cancel()
		fencewant.Unknown(t, <-got, 2)
	case "twice":
		if err := write(t.Context()); err != nil {
			t.Fatalf("E: %v", err)
		}
	case "reply lost":
		in.Next(putsKey(a.FloorKey("k")), reqfault.LostReply)
		err := write(t.Context())
		fencewant.Unknown(t, err, 2)
	}
	if setup == "a wrote 2 with the guess cleared" && delivery == "twice" {
		if got := in.Calls("KV/Txn") - beforeE; got != 2 {
			t.Errorf("E after a's guesses were dropped: %d transactions, want 2 (the first form refused by the floor of its token, then the second)", got)
		}
	}
	mu.Lock()
	rec = false
	last := reqs[len(reqs)-1]
	mu.Unlock()
	// L.
	x := map[string]*etcdfence.Store{"a": a, "b (new)": mustNew(t, etcdClient(t), p), "c": c}[store]
	var err error
	wantGone := false
	switch later {
	case "Put":
		err = x.Put(t.Context(), "k", 2, []byte("later"))
	case "Delete":
		err, wantGone = x.Delete(t.Context(), "k", 2), true
	case "Update":
		err = x.Update(t.Context(), "k", 2, func(fence.Record) ([]byte, error) { return []byte("later"), nil })
	case "UpdateAll":
		err = x.UpdateAll(t.Context(), []fence.Claim{{Resource: "k", Token: 2}, {Resource: "other", Token: 2}}, func(map[string]fence.Record) (map[string][]byte, error) {
			return map[string][]byte{"k": []byte("later")}, nil
		})
	case "Outbox.Update":
		err = mustOutbox(t, x).Update(t.Context(), "k", 2, func(fence.Record) ([]byte, []outbox.Effect, error) { return []byte("later"), nil, nil })
	case "GetForUpdate+Put":
		if _, err := x.GetForUpdate(t.Context(), "k", 2); err != nil && !errors.Is(err, fence.ErrNotFound) {
			t.Fatal(err)
		}
		err = x.Put(t.Context(), "k", 2, []byte("later"))
	}
	if err != nil {
		t.Fatalf("L: got %v, want nil", err)
	}
	want := func(when string) {
		t.Helper()
		r, err := c.Get(t.Context(), "k")
		switch {
		case wantGone && !errors.Is(err, fence.ErrNotFound):
			t.Fatalf("%s: Get: got token %d %q, %v; want ErrNotFound (L deleted k)", when, r.Token, r.Value, err)
		case !wantGone && (err != nil || string(r.Value) != "later" || r.Token != 2):
			t.Fatalf("%s: Get: got token %d %q, %v; want token 2 %q", when, r.Token, r.Value, err, "later")
		}
		if v, _ := rawValue(t, direct, a.FloorKey("k")); v != "0000000000000000002" {
			t.Fatalf("%s: floor %q, want token 2", when, v)
		}
	}
	want("after L")
	before := revision(t, direct)
	switch delivery {
	case "late":
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("E's late delivery: %v", err)
		}
	default:
		resend(t, direct, last)
	}
	want("after E's delivery")
	if after := revision(t, direct); after != before {
		t.Fatalf("E's delivery wrote: revision %d → %d", before, after)
	}
}
