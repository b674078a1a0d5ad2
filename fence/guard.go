package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Holder is anything that holds a fencing token while a lock is held: an
// *etcdlock.Lock, or a leader election's term.
//
// Token must return the same valid token for the holder's whole life. Done
// returns a channel that is closed once the holder knows, or suspects, that
// it no longer holds the lock.
type Holder interface {
	Token() Token
	Done() <-chan struct{}
}

// Expirer is implemented by holders that know the latest instant up to which
// they are sure they still hold the lock, such as *etcdlock.Lock. The time
// must carry a monotonic clock reading (as time.Now does) so that wall-clock
// jumps cannot stretch it. A [Guard] refuses locally once it has passed.
type Expirer interface {
	ValidUntil() time.Time
}

// RefusalObserver is implemented by holders that want to know of the
// writes a [Guard] refuses locally, the way [Expirer] is implemented by
// those that know their deadline. *etcdlock.Lock and *etcdlock.Term
// implement it: they count each refusal in the fencelock.writes metric
// (outcome lock_lost) and log it.
//
// [Guard.Do] and [Guard.Put] call WriteRefused with the write's context and
// the error they are about to return, which matches [ErrLockLost], and then
// return that error; [Guard.Check] alone does not call it. WriteRefused
// must be safe for concurrent use and return promptly.
type RefusalObserver interface {
	WriteRefused(ctx context.Context, err error)
}

// TokenIssuer is implemented by holders whose lock service can tell
// whether a token could have come from it: *etcdlock.Lock and
// *etcdlock.Term (a token is a revision; etcd issued it if its current
// revision has reached it). When the resource refuses a write of a
// [Guard] with a [*StaleError] whose Current exceeds the guard's token,
// the Guard asks the holder whether Current was issued; if not, its error
// also matches [ErrTokenRegressed].
type TokenIssuer interface {
	// Issued reports whether the lock service has issued tokens up to t;
	// false means t is beyond all of them. An error when it cannot tell.
	Issued(ctx context.Context, t Token) (bool, error)
}

// Guard carries a holder's fencing token into storage writes.
//
// Before each write it checks, locally and without I/O, that the holder has
// not already learnt that the lock is lost ([Holder.Done] closed) and that its
// validity deadline ([Expirer]) has not passed; if either has, it refuses with
// [ErrLockLost] (and tells a holder that is a [RefusalObserver]). That check is only an optimisation: a holder can be paused
// right after passing it. The guarantee comes from the resource, which refuses
// any write whose token is older than one it has accepted ([ErrStale]).
//
// A Guard is safe for concurrent use. The zero Guard is not usable (Check,
// Do and Put fail with [ErrInvalidArgument]); create one with [NewGuard].
type Guard struct {
	h     Holder
	obs   RefusalObserver // nil: h is not one
	iss   TokenIssuer     // nil: h is not one
	token Token
	named string // h's IssuerNamer name; "": none
}

// NewGuard returns a guard for h. It fails if h is nil (also a nil pointer
// in the interface, as from an ignored error) or its token is not valid.
func NewGuard(h Holder) (*Guard, error) {
	if nilcheck.IsNil(h) {
		return nil, fmt.Errorf("%w: NewGuard: nil holder", ErrInvalidArgument)
	}
	t := h.Token()
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("fence: NewGuard: %w", err)
	}
	obs, _ := h.(RefusalObserver)
	iss, _ := h.(TokenIssuer)
	var named string
	if n, ok := h.(IssuerNamer); ok {
		named = n.Issuer()
	}
	return &Guard{h: h, obs: obs, iss: iss, token: t, named: named}, nil
}

// Token returns the holder's fencing token.
func (g *Guard) Token() Token { return g.token }

// Check returns an error matching [ErrLockLost] when the holder is known to
// have lost the lock or its validity deadline has passed, and nil otherwise.
// A nil result is not a promise: see [Guard].
func (g *Guard) Check() error {
	if err := g.usable(); err != nil {
		return err
	}
	select {
	case <-g.h.Done():
		return fmt.Errorf("%w (token %d: holder reports the lock lost)", ErrLockLost, g.token)
	default:
	}
	if e, ok := g.h.(Expirer); ok {
		if until := e.ValidUntil(); !time.Now().Before(until) {
			return fmt.Errorf("%w (token %d: validity deadline passed %v ago)", ErrLockLost, g.token, time.Since(until).Round(time.Millisecond))
		}
	}
	return nil
}

// Do runs write with the guard's token after checking [Guard.Check] and
// ctx. It returns an error matching [ErrLockLost] (also when ctx ended
// because the lock was lost, as etcdlock's Client.Do ends fn's context) or
// ctx's error without calling write (telling a holder that is a [RefusalObserver] of the latter), and
// otherwise whatever write returns. write must send the token to
// the resource, which makes the decision that counts. When the holder is
// an [IssuerNamer], write's context carries its issuer's name
// ([ContextWithIssuer]) for the stores that check it; otherwise it
// carries none, even if ctx did.
func (g *Guard) Do(ctx context.Context, write func(ctx context.Context, token Token) error) error {
	if err := g.usable(); err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("%w: Guard.Do: nil write function", ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("%w: Guard.Do: nil context", ErrInvalidArgument)
	}
	// The holder's loss first: a context that ended because the lock was
	// lost (etcdlock's Do cancels fn's) says ErrLockLost, not a bare
	// context.Canceled; its context.Cause names the loss.
	if err := g.Check(); err != nil {
		if g.obs != nil {
			g.obs.WriteRefused(ctx, err)
		}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wctx := ctx
	if IssuerFromContext(ctx) != g.named { // none clears a caller's (another Guard's write)
		wctx = ContextWithIssuer(ctx, g.named)
	}
	return g.explain(ctx, write(wctx, g.token))
}

// explain adds [ErrTokenRegressed] to a staleness refusal whose highest
// accepted token the holder's lock service never issued (see TokenIssuer).
// It costs a request to the lock service, and only on such a refusal of a
// holder that has not learnt it lost the lock: a holder that did (a paused
// one, the usual stale writer) has a newer holder to blame, and may be cut
// off from the lock service too. The request is bounded by
// issuedTimeout, so that the write's answer is never held up long.
func (g *Guard) explain(ctx context.Context, err error) error {
	var se *StaleError
	if g.iss == nil || !errors.As(err, &se) || se.Current <= g.token {
		return err
	}
	select {
	case <-g.h.Done():
		return err
	default:
	}
	ictx, cancel := context.WithTimeout(ctx, issuedTimeout)
	defer cancel()
	issued, ierr := g.iss.Issued(ictx, se.Current)
	if ierr != nil || issued {
		return err
	}
	return fmt.Errorf("%w: %w (the resource's highest token, %d, is above every token the lock service has issued: "+
		"it was replaced or restored from an earlier snapshot; no newer holder of it exists, unless another lock service fences this resource too; see docs/restore.md)", ErrTokenRegressed, err, se.Current)
}

// usable refuses a nil or zero Guard, which would otherwise panic.
func (g *Guard) usable() error {
	if g == nil || g.h == nil {
		return fmt.Errorf("%w: a nil or zero Guard; create one with NewGuard", ErrInvalidArgument)
	}
	return nil
}

// issuedTimeout bounds the question explain asks the lock service.
const issuedTimeout = time.Second

// Put writes value to key in s with the guard's token, as [Guard.Do] does.
func (g *Guard) Put(ctx context.Context, s Store, key string, value []byte) error {
	if nilcheck.IsNil(s) {
		return fmt.Errorf("%w: Guard.Put: nil store", ErrInvalidArgument)
	}
	return g.Do(ctx, func(ctx context.Context, t Token) error {
		return s.Put(ctx, key, t, value)
	})
}
