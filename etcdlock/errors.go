package etcdlock

import "errors"

// ErrLocked means TryLock found the lock held (or queued for) by another
// acquisition. TryLock left no key behind.
var ErrLocked = errors.New("etcdlock: locked by another holder")

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

// ErrClosed means the [Client] was closed.
var ErrClosed = errors.New("etcdlock: client closed")

// ErrInvalidName means a lock name was empty, too long, not valid UTF-8, or
// contained '/' or a control character.
var ErrInvalidName = errors.New("etcdlock: invalid lock name")

// ErrInvalidOption means an option was given an invalid value (a non-positive
// TTL, an empty prefix, ...).
var ErrInvalidOption = errors.New("etcdlock: invalid option")

// lostError ties a cause (ErrLeaseExpired, ErrKeyDeleted, ...) to ErrLost.
type lostError struct{ cause error }

func (e *lostError) Error() string   { return ErrLost.Error() + ": " + e.cause.Error() }
func (e *lostError) Unwrap() []error { return []error{ErrLost, e.cause} }
func lost(cause error) error         { return &lostError{cause: cause} }
