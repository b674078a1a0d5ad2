package fence

import (
	"bytes"
	"context"
	"errors"
)

// UpdateAll claims every key of claims with its token, passes their
// records to fn, and stores fn's values if no key's entry has changed
// since the read (fn runs without the store's lock, as it would against a
// server); else it tries again, up to [UpdateAttempts] times. The claims
// are taken together: a higher floor on any key refuses them all, before
// fn runs. It is [RunUpdateAll] over the store. See [AllUpdater].
func (m *MemoryStore) UpdateAll(ctx context.Context, claims []Claim, fn UpdateAllFunc) error {
	return RunUpdateAll(ctx, (*memoryRounds)(m), claims, fn)
}

// ClaimReadAll claims every key of set, or none if one is refused, and
// returns their records and entries as read.
func (r *memoryRounds) ClaimReadAll(ctx context.Context, set []Claim) (map[string]Record, []entry, error) {
	m := (*MemoryStore)(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range set {
		if err := m.admit(ctx, c.Resource, c.Token, m.recs[c.Resource]); err != nil {
			return nil, nil, err
		}
	}
	old := make(map[string]Record, len(set))
	seen := make([]entry, len(set))
	for i, c := range set {
		r, err := m.claim(ctx, c.Resource, c.Token)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		old[c.Resource], seen[i] = r, m.recs[c.Resource]
	}
	return old, seen, nil
}

// WriteAllIf stores next's values if every key of set still has its entry
// seen: [ErrChanged] when one changed, an error matching [ErrStale] when a
// higher token is on one now.
func (r *memoryRounds) WriteAllIf(ctx context.Context, set []Claim, seen []entry, next map[string][]byte) error {
	m := (*MemoryStore)(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for i, c := range set {
		cur := m.recs[c.Resource]
		if err := m.admit(ctx, c.Resource, c.Token, cur); err != nil {
			return err
		}
		changed = changed || cur.version != seen[i].version
	}
	if changed {
		return ErrChanged
	}
	for _, c := range set {
		if v, ok := next[c.Resource]; ok {
			m.store(c.Resource, entry{rec: Record{Value: bytes.Clone(v), Token: c.Token}, set: true, issuer: IssuerFromContext(ctx)})
		}
	}
	return nil
}

var _ AllUpdater = (*MemoryStore)(nil)
