package etcdlock

import (
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errfamily"
)

// ErrLocked means TryLock found the lock held (or queued for) by another
// acquisition. TryLock left no key behind. The error TryLock returns is a
// [*LockedError] naming the holders.
var ErrLocked = errors.New("etcdlock: locked by another holder")

// LockedError is the error TryLock returns when the lock is held: it
// matches [ErrLocked] and tells who holds it, as read in the same request
// that found it held, so a caller can log e.g.
//
//	etcdlock: "report-job" locked by host-7/4121 (token 812) since 10:02:03
//
// A semaphore's TryAcquire lists every permit's holder, and a TryLock that
// met readers sharing the lock lists them, up to 16 (More says when more
// hold it):
//
//	etcdlock: "pool" locked by 2 holders: w1/311 (token 31, slot 0) since 10:02:03, w2/92 (token 35, slot 1) since 10:02:04
type LockedError struct {
	Name    string
	Holder  Entry   // the first holder (Holders[0])
	Holders []Entry // every holder read, in arrival order; nil on an error made by hand
	More    bool    // more hold it than Holders lists (readers beyond 16)
}

func (e *LockedError) Error() string {
	if len(e.Holders) <= 1 {
		return fmt.Sprintf("etcdlock: %q locked by %v", e.Name, e.Holder)
	}
	hs := make([]string, len(e.Holders))
	for i, h := range e.Holders {
		hs[i] = h.format(true)
	}
	if e.More {
		return fmt.Sprintf("etcdlock: %q locked by more than %d holders, the first %[2]d: %s", e.Name, len(e.Holders), strings.Join(hs, ", "))
	}
	return fmt.Sprintf("etcdlock: %q locked by %d holders: %s", e.Name, len(e.Holders), strings.Join(hs, ", "))
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// ErrLost means the lock is lost, or may be: the lease expired or was
// revoked, no keepalive was acknowledged before the validity deadline, or the
// lock's key was deleted by someone else. [Lock.Err] wraps it with the cause.
var ErrLost = errors.New("etcdlock: lock lost")

// ErrLeaseExpired means etcd reported the session's lease gone (expired or
// revoked). Errors that wrap it also match [ErrLost] when it ended a lock.
var ErrLeaseExpired = errors.New("etcdlock: lease expired or revoked")

// ErrValidityExpired means the validity deadline passed with no keepalive
// acknowledged since: etcd may already have expired the lease.
var ErrValidityExpired = errors.New("etcdlock: validity deadline passed without a keepalive acknowledgement")

// ErrKeyDeleted means the lock's key was deleted by someone other than this
// lock's Unlock.
var ErrKeyDeleted = errors.New("etcdlock: lock key deleted by someone else")

// ErrUnlocked is what [Lock.Err] returns after [Lock.Unlock].
var ErrUnlocked = errors.New("etcdlock: unlocked")

// ErrResigned is what [Term.Err] returns after [Term.Resign].
var ErrResigned = errors.New("etcdlock: resigned")

// ErrNoLeader means an election has no candidate, so no leader
// ([Client.Leader]).
var ErrNoLeader = errors.New("etcdlock: election has no leader")

// ErrNotHolder means [Client.Break] was given a token that is not the
// current holder's: the lock is free or held by another acquisition.
// Nothing was deleted.
var ErrNotHolder = errors.New("etcdlock: token is not the holder's")

// ErrPermits is matched by the error of an acquisition whose semaphore is
// used by others with another number of permits: callers of one name must
// agree on it.
var ErrPermits = errors.New("etcdlock: callers disagree on the semaphore's permits")

// ErrUnhealthy is what [LeaderHealth.Check] returns, wrapped with the
// election, the term and the reason, when a lead function runs past its
// term's validity deadline or after its context was cancelled.
var ErrUnhealthy = errors.New("etcdlock: leader unhealthy")

// ErrClosed means the [Client] was closed.
var ErrClosed = errors.New("etcdlock: client closed")

// ErrInvalidName means a name (of any kind: a lock's, an election's, a
// semaphore's, a group's) was empty, too long, not valid UTF-8, or
// contained a control character. A '/' is allowed
// (tenant/42/report): keys spell it escaped.
var ErrInvalidName = errfamily.New("etcdlock: invalid name", ErrInvalidArgument)

// ErrInvalidData means data given with an acquisition ([WithMetadata], an
// election value) is longer than [MaxDataLen] or not valid UTF-8 (the
// record is JSON, which cannot carry other bytes unchanged: encode binary
// data, e.g. in base64). Nothing was sent.
var ErrInvalidData = errfamily.New("etcdlock: invalid data", ErrInvalidArgument)

// ErrInvalidArgument means a nil context, a nil etcd client or a nil
// function was passed where one is required, a kind that is none of
// [Kinds] was given to [Client.List], or a method was called on a nil or
// zero value of a type of this package (Client, Lock, Term, Semaphore,
// Group, MultiLock, LeaderHealth). Nothing was sent. It matches [fence.ErrInvalidArgument], and every
// invalid input's error matches it.
var ErrInvalidArgument = errfamily.New("etcdlock: invalid argument", fence.ErrInvalidArgument)

// ErrInvalidOption means an option was given an invalid value (a non-positive
// TTL, an empty prefix, ...).
var ErrInvalidOption = errfamily.New("etcdlock: invalid option", ErrInvalidArgument)

// PermissionError means etcd refused a request of the client for lack of
// permission on its keys. Every key the client reads or writes is under
// Prefix (see [WithPrefix]), and its role needs readwrite on all of them:
//
//	etcdctl role grant-permission ROLE readwrite PREFIX --prefix
//
// Err is the error the request failed with; it matches
// rpctypes.ErrPermissionDenied. Lock and TryLock leave no key behind and
// do not retry; Unlock and Close, given one, do not retry either.
type PermissionError struct {
	Prefix string
	Err    error
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("%v: the client's etcd role needs readwrite on every key under %q (etcdctl role grant-permission ROLE readwrite %s --prefix)",
		e.Err, e.Prefix, e.Prefix)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// errKeyDeletedMaybeUs is a lock's loss when its release found the key
// gone after a release of ours sent while etcd was out of space (which
// refuses the marker write that tells our deletion from another's) lost
// its reply: it matches ErrKeyDeleted and fence.ErrUnknownOutcome.
var errKeyDeletedMaybeUs = fmt.Errorf("%w, or by a release of ours sent while etcd was out of space (%w: its reply was lost, and no marker tells)", ErrKeyDeleted, fence.ErrUnknownOutcome)

// prefixed is err with a prefix (a lock's name, say) formatted when the
// error is read rather than when it is made, as fmt.Errorf would: making
// one never waits for a cause still being found out (pendingCause).
type prefixed struct {
	prefix string
	err    error
}

// wrapLost is fmt.Errorf(format+"%w", args..., err) for an error that may
// carry a lock's loss: err's message is read when the result's is, so
// that wrapping a cause still being found out does not wait for it.
func wrapLost(err error, format string, args ...any) error {
	return &prefixed{prefix: fmt.Sprintf(format, args...), err: err}
}

func (e *prefixed) Error() string { return e.prefix + e.err.Error() }
func (e *prefixed) Unwrap() error { return e.err }

// lostError ties a cause (ErrLeaseExpired, ErrKeyDeleted, ...) to ErrLost.
type lostError struct{ cause error }

func (e *lostError) Error() string   { return ErrLost.Error() + ": " + e.cause.Error() }
func (e *lostError) Unwrap() []error { return []error{ErrLost, e.cause} }

// lost returns an error matching ErrLost and cause; a nil cause (a bug:
// every loss has one) is reported as ErrLost alone rather than as an
// error whose Error method panics.
func lost(cause error) error {
	if cause == nil {
		return ErrLost
	}
	return &lostError{cause: cause}
}

// permanent reports whether retrying a request that failed with err is
// pointless: etcd refused it for lack of permission or authentication.
func permanent(err error) bool {
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.PermissionDenied, codes.Unauthenticated:
			return true
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrAuthFailed),
		errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthMgmt):
		return true
	}
	return false
}

// refused reports whether etcd answered a request with a refusal, so that
// it was not applied and never will be; false when the outcome is unknown
// (the caller gave up, the connection broke, the proposal timed out).
func refused(err error) bool {
	code := status.Code(err)
	if ee := (rpctypes.EtcdError{}); errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated,
		codes.OutOfRange, codes.NotFound, codes.AlreadyExists, codes.ResourceExhausted:
		return true
	}
	return false
}
