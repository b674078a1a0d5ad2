package etcdfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// authPrefix is the store's prefix on the member authEtcd starts; the
// outbox lives under authPrefix + "outbox/".
const authPrefix = "/app/"

// authEtcd starts a member with auth on and returns its endpoints, after
// creating root and, for each of users, a user of that name (password
// "pw") whose role of the same name has perm on the keys under grant only.
func authEtcd(t *testing.T, grant string, users map[string]clientv3.PermissionType) []string {
	t.Helper()
	eps := embedetcd.NewServer(t, embedetcd.WithAuthToken("simple", time.Minute), embedetcd.WithBcryptCost(4)).Endpoints()
	root := authClient(t, eps, "", "")
	ctx := t.Context()
	steps := []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
	}
	for name, perm := range users {
		steps = append(steps,
			func() error { _, err := root.RoleAdd(ctx, name); return err },
			func() error {
				_, err := root.RoleGrantPermission(ctx, name, grant, clientv3.GetPrefixRangeEnd(grant), perm)
				return err
			},
			func() error { _, err := root.UserAdd(ctx, name, "pw"); return err },
			func() error { _, err := root.UserGrantRole(ctx, name, name); return err },
		)
	}
	steps = append(steps, func() error { _, err := root.AuthEnable(ctx); return err })
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("setting up auth: %v", err)
		}
	}
	return eps
}

// authClient returns a client of eps logged in as user (none when empty).
func authClient(t *testing.T, eps []string, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Username: user, Password: password,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// authOutbox returns the Outbox under authPrefix of a client logged in as
// user.
func authOutbox(t *testing.T, eps []string, user string) *etcdfence.Outbox {
	t.Helper()
	o, err := etcdfence.NewOutbox(mustNew(t, authClient(t, eps, user, "pw"), authPrefix), authPrefix+"outbox/")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// runFor runs a dispatcher on o for at most d and returns Run's error.
func runFor(t *testing.T, o outbox.Log, d time.Duration) error {
	t.Helper()
	disp, err := outbox.NewDispatcher(o, outbox.SenderFunc(func(context.Context, outbox.Effect) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return disp.Run(ctx, held{token: 1}, outbox.All)
}

// TestOutboxNotPermitted: with auth on, a user that may only read the
// outbox's keys fails Check, Settle and Requeue with an error matching
// outbox.ErrNotPermitted in etcd's words, and a dispatcher run as it ends
// at start with that error instead of retrying; a user without even read
// permission fails Pending and Parked the same way. The control, a user
// with readwrite on the keys, passes Check and its dispatcher runs until
// its context ends.
func TestOutboxNotPermitted(t *testing.T) {
	testenv.Long(t, "starts an etcd member of its own, with auth on: about 1 s")
	eps := authEtcd(t, authPrefix+"outbox/", map[string]clientv3.PermissionType{
		"reader": clientv3.PermissionType(clientv3.PermRead),
		"writer": clientv3.PermissionType(clientv3.PermReadWrite),
		"other":  clientv3.PermissionType(clientv3.PermReadWrite), // used on another prefix
	})
	ctx := t.Context()
	reader := authOutbox(t, eps, "reader")
	wantNotPermitted := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, outbox.ErrNotPermitted) || !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("%s as a read-only user: got %v, want an error matching outbox.ErrNotPermitted and etcd's permission denied", what, err)
		}
	}
	wantNotPermitted("Check", reader.Check(ctx, outbox.All))
	wantNotPermitted("Settle", reader.Settle(ctx, fence.Claim{Resource: "d", Token: 1}, nil))
	wantNotPermitted("Requeue", reader.Requeue(ctx, effect("acct", 1, 0)))
	if _, err := reader.Pending(ctx, outbox.All, nil, 1); err != nil {
		t.Fatalf("Pending as a read-only user: got %v, want nil", err)
	}
	start := time.Now()
	err := runFor(t, reader, 30*time.Second)
	wantNotPermitted("Run", err)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Run as a read-only user took %v to give up, want at once", took)
	}

	// No permission at all on the keys an Outbox of another prefix uses.
	stranger, err := etcdfence.NewOutbox(mustNew(t, authClient(t, eps, "other", "pw"), authPrefix), "/elsewhere/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Pending(ctx, outbox.All, nil, 1); !errors.Is(err, outbox.ErrNotPermitted) {
		t.Fatalf("Pending without read permission: got %v, want ErrNotPermitted", err)
	}
	if _, err := stranger.Parked(ctx, outbox.All, 1); !errors.Is(err, outbox.ErrNotPermitted) {
		t.Fatalf("Parked without read permission: got %v, want ErrNotPermitted", err)
	}

	// Control: readwrite passes, and its dispatcher runs until ctx ends.
	writer := authOutbox(t, eps, "writer")
	if err := writer.Check(ctx, outbox.All); err != nil {
		t.Fatalf("Check as a readwrite user: got %v, want nil", err)
	}
	if err := runFor(t, writer, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run as a readwrite user: got %v, want the context's end", err)
	}
}

// TestOutboxCheckWritesNothing: Check sends a write transaction that
// changes no key, so the revision stays where it was.
func TestOutboxCheckWritesNothing(t *testing.T) {
	_, o := newOutbox(t)
	cli := etcdClient(t)
	before := revision(t, cli)
	if err := o.Check(t.Context(), outbox.All); err != nil {
		t.Fatalf("Check with auth off: got %v, want nil", err)
	}
	if after := revision(t, cli); after != before {
		t.Fatalf("revision after Check: got %d, want %d (nothing written)", after, before)
	}
}

// held is a lock held for the test's length.
type held struct{ token fence.Token }

func (h held) Token() fence.Token    { return h.token }
func (h held) Done() <-chan struct{} { return nil }
