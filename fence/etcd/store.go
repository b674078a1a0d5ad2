package etcdfence

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/nilcheck"
	"github.com/fencelock/fencelock/internal/tel"
)

// The two key spaces under a Store's prefix.
const (
	floorSpace = "floor/"
	dataSpace  = "data/"
)

// Store is a [fence.Store] whose records are etcd keys under one prefix:
// each resource key has a floor key, holding the highest token accepted for
// it, and a data key, holding the record. Put and Delete are each one etcd
// transaction that compares the floor and writes, so etcd, not the Store,
// decides every write. GetForUpdate and Update read the way a write that
// follows needs ([fence.Updater]). See the package documentation for the
// layout.
//
// A Store holds no state of its own beyond its configuration, the last
// revision it saw in a reply, the turns of its writes under way and the
// token of its last write of each key (a guess, bounded): it is safe for
// concurrent use, and any number of Stores, in any number of
// processes, may share a prefix. The zero Store is not usable (its methods
// fail with [ErrInvalidArgument]); create one with [New].
type Store struct {
	kv     clientv3.KV
	prefix string
	opts   options
	tel    *tel.Recorder
	// seen is the highest revision in the header of a reply to the
	// Store's requests: every later write lands past it, which is how
	// Put and Delete tell a copy of an earlier write (see fencedWrite).
	seen atomic.Int64
	// writing sends the Store's writes of one key one at a time (Puts,
	// Deletes, and the writes of Update, UpdateAll and Outbox.Update,
	// which put the floor too): concurrent ones would each find the floor
	// put past the seen they were sent with by another, and be sent again.
	writing keyQueue
	// floors remembers the token of the Store's last write or claim of
	// a key, which picks the form of its next write (see fencedWrite).
	floors floorGuess
}

// floorGuesses bounds floorGuess: past it, the guesses are dropped, and
// the next write of each key costs a second transaction when its floor
// is its token already.
const floorGuesses = 4096

// floorGuess is the token each key's floor had at the Store's last write
// or claim of it: a guess, which only picks the form of a write.
type floorGuess struct {
	mu   sync.Mutex
	last map[string]fence.Token
}

// is reports whether key's floor was token at the Store's last write or
// claim of it.
func (g *floorGuess) is(key string, token fence.Token) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last[key] == token
}

// set records that key's floor is token.
func (g *floorGuess) set(key string, token fence.Token) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil || len(g.last) >= floorGuesses {
		g.last = make(map[string]fence.Token)
	}
	g.last[key] = token
}

// forget drops the guess for key.
func (g *floorGuess) forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, key)
}

// keyQueue lets one caller at a time through for each key.
type keyQueue struct {
	mu   sync.Mutex
	keys map[string]*keyTurn
}

// keyTurn is a key's turn: a token in turn is the caller through; waiting
// counts the callers through or waiting, and the key is forgotten when it
// drops to zero.
type keyTurn struct {
	turn    chan struct{}
	waiting int
}

// enter waits for key's turn, or for ctx to end (its error is returned,
// and nothing is held). Call the returned func to let the next caller in.
func (q *keyQueue) enter(ctx context.Context, key string) (func(), error) {
	q.mu.Lock()
	if q.keys == nil {
		q.keys = map[string]*keyTurn{}
	}
	k := q.keys[key]
	if k == nil {
		k = &keyTurn{turn: make(chan struct{}, 1)}
		q.keys[key] = k
	}
	k.waiting++
	q.mu.Unlock()
	leave := func() {
		q.mu.Lock()
		if k.waiting--; k.waiting == 0 {
			delete(q.keys, key)
		}
		q.mu.Unlock()
	}
	select {
	case k.turn <- struct{}{}:
		return func() { <-k.turn; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// turns takes the Store's write turns of keys (see Store.writing) for a
// write what. If ctx ends first, the error says so, and that nothing was
// sent.
func (s *Store) turns(ctx context.Context, what string, keys ...string) (func(), error) {
	leave, err := s.writing.enterAll(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("etcdfence: %s %q: %w while the Store's writes of the key before it were under way; nothing sent", what, strings.Join(keys, ", "), err)
	}
	return leave, nil
}

// enterAll waits for the turns of keys, in sorted order, so that callers
// holding several never wait for each other in a cycle (one holding one
// turn waits for no other). If ctx ends first, the turns taken are left
// and its error is returned. Call the returned func to leave them all.
func (q *keyQueue) enterAll(ctx context.Context, keys []string) (func(), error) {
	if len(keys) == 1 { // a Put's, a Delete's, an Update's: nothing to sort
		return q.enter(ctx, keys[0])
	}
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	leaves := make([]func(), 0, len(keys))
	leaveAll := func() {
		for _, leave := range slices.Backward(leaves) {
			leave()
		}
	}
	for _, k := range keys {
		leave, err := q.enter(ctx, k)
		if err != nil {
			leaveAll()
			return nil, err
		}
		leaves = append(leaves, leave)
	}
	return leaveAll, nil
}

var (
	_ fence.Store   = (*Store)(nil)
	_ fence.Updater = (*Store)(nil)
)

// New returns a Store that keeps its keys under prefix, through kv: a
// *clientv3.Client, or any clientv3.KV (such as one from
// go.etcd.io/etcd/client/v3/namespace). It does no I/O. It fails, before any
// I/O, if kv is nil (a typed nil too) or prefix is empty (an error matching
// [ErrInvalidArgument]), or an option is invalid ([ErrInvalidOption]).
//
// The prefix is used as given: end it with a separator ("/app/fences/"),
// and give no two Stores prefixes one of which starts with the other unless
// they are meant to share keys.
func New(kv clientv3.KV, prefix string, opts ...Option) (*Store, error) {
	if nilcheck.IsNil(kv) {
		return nil, fmt.Errorf("%w: New: nil client (%T)", ErrInvalidArgument, kv)
	}
	if prefix == "" {
		return nil, fmt.Errorf("%w: New: empty prefix", ErrInvalidArgument)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		opt.apply(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	r, err := tel.New("etcd", "github.com/fencelock/fencelock/fence/etcd", o.meters, o.tracers, "put", "delete", opGetForUpdate, opUpdate, opUpdateAll)
	if err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %w", ErrInvalidOption, err)
	}
	return &Store{kv: kv, prefix: prefix, opts: o, tel: r}, nil
}

// Prefix returns the prefix of the store's keys.
func (s *Store) Prefix() string { return s.prefix }

// FloorKey returns the etcd key holding the floor of resource key.
func (s *Store) FloorKey(key string) string { return s.prefix + floorSpace + key }

// DataKey returns the etcd key holding the record of resource key.
func (s *Store) DataKey(key string) string { return s.prefix + dataSpace + key }

// Get returns the record under key: its value and the token of the write
// that stored it. It returns an error matching [fence.ErrNotFound] if key
// has never been written or was deleted ([Store.Delete]), [ErrCorrupt] if
// its data key holds something this package did not write, and one
// matching [fence.ErrInvalidKey] for an empty key, before any I/O. The read
// is linearizable (etcd's default): it sees every write acknowledged before
// it began. ctx bounds the request; when it ends, Get returns its error.
func (s *Store) Get(ctx context.Context, key string) (fence.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return fence.Record{}, err
	}
	resp, err := s.kv.Get(ctx, s.DataKey(key))
	if err != nil {
		return fence.Record{}, fmt.Errorf("etcdfence: get %q: %w", key, err)
	}
	s.saw(resp.Header)
	if len(resp.Kvs) == 0 {
		return fence.Record{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return decodeRecord(key, resp.Kvs[0].Value)
}

// checkCall validates the Store, a call's key and its context before any
// I/O.
func (s *Store) checkCall(ctx context.Context, key string) error {
	if s == nil || s.kv == nil {
		return fmt.Errorf("%w: a nil or zero Store; create one with New", ErrInvalidArgument)
	}
	if key == "" {
		return fmt.Errorf("%w: empty key", fence.ErrInvalidKey)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return ctx.Err()
}

// saw raises the last revision the Store saw to h's, when it is higher.
func (s *Store) saw(h *pb.ResponseHeader) {
	if h == nil {
		return
	}
	for {
		cur := s.seen.Load()
		if h.Revision <= cur || s.seen.CompareAndSwap(cur, h.Revision) {
			return
		}
	}
}
