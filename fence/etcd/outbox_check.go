package etcdfence

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/fencelock/fencelock/fence/outbox"
)

var _ outbox.Checker = (*Outbox)(nil)

// Check returns an error matching [outbox.ErrNotPermitted], with etcd's
// words, unless the client's user may read and write the keys a
// dispatcher uses: the effects (e/), the parked markers (p/) and the
// dispatchers' floors (f/) under the prefix ([outbox.Checker]). It sends
// one transaction that writes nothing:
//
//	If(CreateRevision(PREFIX f/) < 0)  Then(Delete(PREFIX e/), Delete(PREFIX p/), Delete(PREFIX f/))  Else(Get(e/…, limit 1), Get(p/…, limit 1), Get(f/…, limit 1))
//
// etcd checks the permissions of both branches before it evaluates the
// comparison, which no key meets (a create revision is never negative);
// the deletes name the bare space keys, which no Outbox writes, so the
// branch would delete nothing even if it ran. With auth off every user
// passes. scope is checked, and otherwise not used: etcd grants key
// ranges, not resources. Other failures are returned as they are, for
// the dispatcher to retry. ctx bounds the request.
func (o *Outbox) Check(ctx context.Context, scope outbox.Scope) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := scope.Validate(); err != nil {
		return err
	}
	spaces := []string{effectSpace, parkedSpace, settleSpace}
	var writes, reads []clientv3.Op
	for _, s := range spaces {
		k := o.prefix + s
		writes = append(writes, clientv3.OpDelete(k))
		reads = append(reads, clientv3.OpGet(k, clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithKeysOnly()))
	}
	_, err := o.store.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(o.prefix+settleSpace), "<", 0)).
		Then(writes...).Else(reads...).Commit()
	if err != nil {
		return notPermitted(fmt.Errorf("etcdfence: checking the grants under %q: %w", o.prefix, err))
	}
	return nil
}

// notPermitted wraps err so that it matches [outbox.ErrNotPermitted] when
// etcd refused the request for the user's permissions (gRPC's
// PermissionDenied: etcd's "permission denied"), and returns it as it is
// otherwise: an invalid or expired auth token, or auth not enabled, is no
// missing grant.
func notPermitted(err error) error {
	if c, ok := code(err); ok && c == codes.PermissionDenied {
		return fmt.Errorf("%w: %w", outbox.ErrNotPermitted, err)
	}
	return err
}
