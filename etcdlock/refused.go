package etcdlock

import (
	"context"
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

var _ fence.RefusalObserver = (*Lock)(nil)

// WriteRefused implements [fence.RefusalObserver]: a [fence.Guard] calls it
// when it refuses a write of l locally, because l is lost or its validity
// deadline has passed. It counts the write in fencelock.writes (attributes
// fencelock.adapter "guard", fencelock.operation "write",
// fencelock.outcome "lock_lost") and as a span guard.write, a child of
// ctx with the lock's name and token, and logs it at warn level with the lock's name, token and
// lease. It never blocks on I/O and is safe for concurrent use; code other
// than a Guard has no reason to call it. On a nil or zero Lock it does
// nothing.
func (l *Lock) WriteRefused(ctx context.Context, err error) {
	if l == nil || l.c == nil {
		return
	}
	l.c.tel.writeRefused(ctx, l, err)
}

// writeRefused records a write a Guard refused for l.
func (tl *telemetry) writeRefused(ctx context.Context, l *Lock, err error) {
	ctx, w := tl.refused.Start(ctx, l.token)
	if w.Recording() {
		w.SetResource(l.t.name)
	}
	w.End(err)
	if tl.log.Enabled(ctx, slog.LevelWarn) {
		tl.log.WarnContext(ctx, "etcdlock: write refused by the guard: lock lost", "kind", kindTable[l.t.kind].name, "name", l.t.name,
			"token", int64(l.token), "lease", leaseHex(l.s.id), "err", err)
	}
}

var _ fence.TokenIssuer = (*Lock)(nil)

// Issued implements [fence.TokenIssuer]: it reports whether etcd's current
// revision has reached t (every token is a revision, so a token above it
// was never issued by this cluster: it was replaced by a new one, or
// restored from a snapshot taken before t). It reads the revision, one
// request bounded by ctx. A [fence.Guard] calls it when a resource refuses
// a write with a higher token than the lock's; a false answer is logged
// at error level, with what to do.
func (l *Lock) Issued(ctx context.Context, t fence.Token) (bool, error) {
	if err := checkCall(ctx, l == nil || l.c == nil, "Lock", "Issued"); err != nil {
		return false, err
	}
	tc, err := l.c.CheckToken(ctx, t)
	if err != nil {
		return false, err
	}
	if !tc.Issued && l.c.tel.log.Enabled(ctx, slog.LevelError) {
		l.c.tel.log.ErrorContext(ctx, "etcdlock: a resource has accepted a token etcd never issued: etcd was replaced or restored from an earlier snapshot; "+
			"every holder's writes are refused until etcd's revision passes it (restore with etcdutl snapshot restore --bump-revision; see docs/restore.md)",
			"name", l.t.name, "token", int64(l.token), "resource_token", int64(t), "etcd_revision", tc.Revision)
	}
	return tc.Issued, nil
}

// TokenCheck is what [Client.CheckToken] found.
type TokenCheck struct {
	Revision int64 // etcd's current revision
	// ClusterID is the cluster ID etcd reports. etcd derives it from the
	// initial cluster's peer URLs and --initial-cluster-token, so a cluster
	// wiped and rebuilt, or restored from a snapshot, with the same ones
	// reports the same ID: it does not tell such clusters apart, and the
	// messages about a token etcd never issued do not show it.
	ClusterID uint64
	Issued    bool // the revision has reached the token
}

// CheckToken compares token, a resource's highest accepted token, with
// etcd's current revision: every token this package hands out is a
// revision, so a token above it was never issued by this cluster, which
// was then replaced by a new one or restored from a snapshot taken before
// it (see docs/restore.md). It reads the revision, one request bounded by
// ctx; a non-positive token fails with [fence.ErrInvalidToken].
func (c *Client) CheckToken(ctx context.Context, token fence.Token) (TokenCheck, error) {
	if err := c.checkCall(ctx, "CheckToken"); err != nil {
		return TokenCheck{}, err
	}
	if err := token.Validate(); err != nil {
		return TokenCheck{}, fmt.Errorf("%w: CheckToken: %w", ErrInvalidArgument, err)
	}
	// One key, counted rather than read: only the header's revision is
	// wanted.
	resp, err := c.cli.Get(ctx, c.o.prefix, clientv3.WithCountOnly())
	if err != nil {
		return TokenCheck{}, fmt.Errorf("etcdlock: CheckToken: %w", c.explain(err))
	}
	return TokenCheck{Revision: resp.Header.Revision, ClusterID: resp.Header.ClusterId, Issued: resp.Header.Revision >= int64(token)}, nil
}
