package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// Campaign waits until this candidate leads the election called name and
// returns its [Term]. Candidates lead in arrival order, each watching only
// its predecessor, exactly as waiters for a lock do ([Client.Lock]): ctx
// bounds the call the same way, a cancelled campaign leaves no key behind,
// and a late or repeated request of it cannot land afterwards.
//
// value is published with the candidacy, for [Client.Leader] and
// [Client.Observe] to read; it may be empty and may not be longer than
// [MaxDataLen] ([ErrInvalidData]). Elections live under prefix+"elect/"+name+"/"
// (the name escaped, see [WithPrefix]),
// apart from locks: a lock and an election of the same name are unrelated.
// Their tokens come from the same revision counter, so a term's token is
// comparable with every lock's.
func (c *Client) Campaign(ctx context.Context, name, value string) (*Term, error) {
	if err := c.checkCall(ctx, "Campaign"); err != nil {
		return nil, err
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	if err := validateData("election value", value); err != nil {
		return nil, err
	}
	l, err := c.acquire(ctx, spot{kind: kindElection, name: name, data: value, wait: true})
	if err != nil {
		return nil, err
	}
	return &Term{l: l, value: value, rev: int64(l.token)}, nil
}

// Term is one candidate's leadership of an election, from [Client.Campaign]
// until it resigns or is lost. It is a [fence.Holder] and a [fence.Expirer]:
// pass it to [fence.NewGuard] so that every write of the term carries its
// token, and the resource refuses a deposed leader's late writes.
//
// A Term is safe for concurrent use; the zero Term is not usable.
type Term struct {
	l *Lock

	proclaiming sync.Mutex // serialises Proclaim; guards rev
	rev         int64      // the key's mod revision as last known; 0: unknown

	mu    sync.Mutex // guards value; never held across a request
	value string
}

var (
	_ fence.Holder          = (*Term)(nil)
	_ fence.Expirer         = (*Term)(nil)
	_ fence.RefusalObserver = (*Term)(nil)
)

// Name returns the election's name.
func (tm *Term) Name() string { return tm.l.Name() }

// Key returns the etcd key of this candidacy.
func (tm *Term) Key() string { return tm.l.Key() }

// Token returns the term's fencing token: the create revision of its key,
// strictly greater than every earlier leader's.
func (tm *Term) Token() fence.Token { return tm.l.Token() }

// Issuer returns the name of the source of the term's token ([WithIssuer]);
// "" by default. It makes a Term a [fence.IssuerNamer].
func (tm *Term) Issuer() string { return tm.l.Issuer() }

var _ fence.IssuerNamer = (*Term)(nil)

// Lease returns the ID of the session lease the term's key is attached to.
func (tm *Term) Lease() clientv3.LeaseID { return tm.l.Lease() }

// TTL returns the lease TTL etcd granted.
func (tm *Term) TTL() time.Duration { return tm.l.TTL() }

// ValidUntil returns the instant, on this process's monotonic clock, up to
// which the lease is known to be alive; see [Lock.ValidUntil].
func (tm *Term) ValidUntil() time.Time { return tm.l.ValidUntil() }

// Done returns a channel that is closed when the term ends: it was lost or
// may be lost (as for [Lock.Done]), the Client was closed, or Resign
// succeeded. Err tells which.
func (tm *Term) Done() <-chan struct{} { return tm.l.Done() }

// Err returns nil while the term lasts. After Done is closed it returns
// [ErrResigned], [ErrClosed], or an error matching [ErrLost] and its cause.
func (tm *Term) Err() error { return tm.l.Err() }

// Value returns the value last published by Campaign or a successful
// Proclaim.
func (tm *Term) Value() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.value
}

// Resign ends the term: it deletes the term's key only while the key's
// create revision still equals the token, so a deposed leader's Resign
// changes nothing, also when it arrives late or twice. It is idempotent and
// behaves as [Lock.Unlock] otherwise: nil when this Resign (or an earlier
// one) deleted the key, an error matching [ErrLost] when the term had been
// lost first; a failed request is retried in the background. The next
// candidate leads as soon as the deletion lands.
func (tm *Term) Resign(ctx context.Context) error {
	if err := checkCall(ctx, tm == nil || tm.l == nil, "Term", "Resign"); err != nil {
		return err
	}
	return tm.l.Unlock(ctx)
}

// maxProclaimTries bounds the Proclaim writes refused because the key's mod
// revision moved: only an earlier Proclaim of this term, landing late, can
// move it.
const maxProclaimTries = 3

// Proclaim publishes a new value for the term, without an election. The
// write lands only while the term's key still exists with the term's token
// as its create revision (a deposed leader's Proclaim changes nothing), and
// only over the value this term last saw written, so an earlier Proclaim
// that failed and lands late cannot overwrite a later one.
//
// It returns nil once the value is written; an error matching [ErrLost]
// when the key is gone or another's (the term is over: Done closes soon, if
// it has not); the term's Err once it has ended; [ErrInvalidData] for a value
// longer than [MaxDataLen]; or the request's error, when the write may or
// may not have landed (a later Proclaim settles it). Its requests end when
// ctx ends or the term does, whichever is first.
func (tm *Term) Proclaim(ctx context.Context, value string) error {
	if err := checkCall(ctx, tm == nil || tm.l == nil, "Term", "Proclaim"); err != nil {
		return err
	}
	if err := validateData("election value", value); err != nil {
		return err
	}
	tm.proclaiming.Lock()
	defer tm.proclaiming.Unlock()
	if err := tm.Err(); err != nil {
		return wrapLost(err, "etcdlock: proclaim %q: ", tm.Name())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(tm.l.life(), cancel)()
	for range maxProclaimTries {
		ok, err := tm.proclaimOnce(ctx, value)
		if err != nil {
			if terr := tm.Err(); terr != nil && !errors.Is(err, ErrLost) {
				// The term ended while the request was out.
				return wrapLost(terr, "etcdlock: proclaim %q: ", tm.Name())
			}
			return fmt.Errorf("etcdlock: proclaim %q: %w", tm.Name(), tm.l.c.explain(err))
		}
		if ok {
			tm.mu.Lock()
			tm.value = value
			tm.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("etcdlock: proclaim %q: the key's value kept changing under us", tm.Name())
}

// proclaimOnce writes value if the key is as last seen; false when it was
// not (tm.rev is then re-read).
func (tm *Term) proclaimOnce(ctx context.Context, value string) (bool, error) {
	l := tm.l
	if tm.rev == 0 {
		resp, err := l.c.cli.Get(ctx, l.t.key)
		if err != nil {
			return false, err
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != int64(l.token) {
			return false, lost(ErrKeyDeleted)
		}
		tm.rev = resp.Kvs[0].ModRevision
	}
	resp, err := l.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.t.key), "=", int64(l.token)),
			clientv3.Compare(clientv3.ModRevision(l.t.key), "=", tm.rev)).
		Then(clientv3.OpPut(l.t.key, encodeRecord(l.c.o.owner, l.t.at, value), clientv3.WithIgnoreLease())).
		Commit()
	if err != nil {
		tm.rev = 0 // it may land later: the next call reads what it left
		return false, err
	}
	if !resp.Succeeded {
		tm.rev = 0
		return false, nil
	}
	tm.rev = resp.Header.Revision
	return true, nil
}

// Held returns a comparison that holds while the term's key exists with
// its token as its create revision; see [Lock.Held].
func (tm *Term) Held() clientv3.Cmp { return tm.l.Held() }

var (
	_ fence.RefusalObserver = (*Term)(nil)
	_ fence.TokenIssuer     = (*Term)(nil)
)

// WriteRefused implements [fence.RefusalObserver]; see [Lock.WriteRefused].
func (tm *Term) WriteRefused(ctx context.Context, err error) {
	if tm != nil {
		tm.l.WriteRefused(ctx, err)
	}
}

// Issued implements [fence.TokenIssuer]; see [Lock.Issued].
func (tm *Term) Issued(ctx context.Context, tok fence.Token) (bool, error) {
	if err := checkCall(ctx, tm == nil || tm.l == nil, "Term", "Issued"); err != nil {
		return false, err
	}
	return tm.l.Issued(ctx, tok)
}
