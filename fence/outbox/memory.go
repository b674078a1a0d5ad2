package outbox

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/fencelock/fencelock/fence"
)

// MemoryLog is an outbox log in memory, for tests of senders and
// receivers and for examples. Its [MemoryLog.Record] is a fenced write of
// effects alone (per resource, a token below the highest recorded is
// refused): it stands in for a store's fenced write, which records the
// effects with the state change they belong to. The zero MemoryLog is not
// usable; create one with [NewMemoryLog]. It is safe for concurrent use.
type MemoryLog struct {
	mu       sync.Mutex             // guards the fields below
	floors   map[string]fence.Token // Record's, by resource
	settlers map[string]fence.Token // Settle's, by dispatcher resource
	effects  []memEffect            // in recording order
	keys     map[string]bool
	watchers map[chan struct{}]Scope
}

type memEffect struct {
	e        Effect
	settled  bool
	parked   string
	attempts int
}

var (
	_ Log      = (*MemoryLog)(nil)
	_ Watcher  = (*MemoryLog)(nil)
	_ Requeuer = (*MemoryLog)(nil)
)

// NewMemoryLog returns an empty [MemoryLog].
func NewMemoryLog() *MemoryLog {
	return &MemoryLog{floors: map[string]fence.Token{}, settlers: map[string]fence.Token{}, keys: map[string]bool{}, watchers: map[chan struct{}]Scope{}}
}

// Record records effects, each of which must be c's resource and token,
// fenced on c: refused with an error matching [fence.ErrStale] when a
// newer token has recorded on c.Resource, and with [ErrDuplicate] for an
// effect recorded before. Nothing is recorded on error.
func (m *MemoryLog) Record(ctx context.Context, c fence.Claim, effects ...Effect) error {
	if err := ValidateAll(effects, []fence.Claim{c}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outbox: MemoryLog.Record: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.floors[c.Resource]; c.Token < f {
		return &fence.StaleError{Resource: c.Resource, Token: c.Token, Current: f}
	}
	for _, e := range effects {
		if m.keys[e.Key()] {
			return fmt.Errorf("%w: %s", ErrDuplicate, e.Key())
		}
	}
	m.floors[c.Resource] = c.Token
	for _, e := range effects {
		e.Payload = slices.Clone(e.Payload)
		m.effects = append(m.effects, memEffect{e: e})
		m.keys[e.Key()] = true
		m.wake(e.Resource)
	}
	return nil
}

func (m *MemoryLog) wake(resource string) {
	for ch, s := range m.watchers {
		if s.Has(resource) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Pending implements [Log].
func (m *MemoryLog) Pending(ctx context.Context, scope Scope, skip []string, limit int) ([]Effect, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Effect
	for _, me := range m.effects {
		if len(out) == limit {
			break
		}
		if !me.settled && scope.Has(me.e.Resource) && !slices.Contains(skip, me.e.Resource) {
			e := me.e
			e.Payload = slices.Clone(e.Payload)
			out = append(out, e)
		}
	}
	return out, nil
}

// Settle implements [Log].
func (m *MemoryLog) Settle(ctx context.Context, by fence.Claim, done []Settled) error {
	if err := by.Token.Validate(); err != nil || by.Resource == "" {
		return fmt.Errorf("%w: outbox: MemoryLog.Settle: by %q with token %d", fence.ErrInvalidArgument, by.Resource, by.Token)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.settlers[by.Resource]; by.Token < f {
		return &fence.StaleError{Resource: by.Resource, Token: by.Token, Current: f}
	}
	m.settlers[by.Resource] = by.Token
	for _, s := range done {
		for i := range m.effects {
			if me := &m.effects[i]; me.e.Key() == s.Effect.Key() && !me.settled {
				me.settled, me.parked, me.attempts = true, s.Parked, s.Attempts
			}
		}
	}
	return nil
}

// Watch implements [Watcher].
func (m *MemoryLog) Watch(ctx context.Context, scope Scope) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.watchers[ch] = scope.norm()
	m.mu.Unlock()
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers, ch)
		close(ch)
	})
	return ch, nil
}

// Parked implements [Requeuer].
func (m *MemoryLog) Parked(ctx context.Context, scope Scope, limit int) ([]Parked, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Parked
	for _, me := range m.effects {
		if me.parked != "" && scope.Has(me.e.Resource) && len(out) < limit {
			out = append(out, Parked{Effect: me.e, Reason: me.parked, Attempts: me.attempts})
		}
	}
	return out, nil
}

// Requeue implements [Requeuer].
func (m *MemoryLog) Requeue(ctx context.Context, e Effect) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.effects {
		if me := &m.effects[i]; me.e.Key() == e.Key() && me.parked != "" {
			me.settled, me.parked = false, ""
			m.wake(e.Resource)
			return nil
		}
	}
	return fmt.Errorf("%w: outbox: %s is not parked", fence.ErrNotFound, e.Key())
}
