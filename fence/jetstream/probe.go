package jsfence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// ProbeKey is the resource key [Store.CheckRevisions] writes (under the
// store's prefix): a floor alone, token 1, no record, whatever the key
// held. A Store's writes refuse it, with an error matching
// [fence.ErrInvalidKey].
const ProbeKey = "fencelock-probe"

// CheckRevisions makes sure the server refuses a write whose expected
// revision does not hold: it writes ProbeKey on its last revision (or
// creates it), then writes it again on the revision before that write,
// and creates it again, and returns an error matching
// [ErrRevisionsIgnored] if either landed. The tests' nats-server (2.9)
// honours it; run it once against a server you have not checked, or one
// behind a proxy. Several
// stores may run it at once. Its writes stay in the bucket, one key's
// history.
func (s *Store) CheckRevisions(ctx context.Context) error {
	if err := s.checkCall(ctx, ProbeKey); err != nil {
		return err
	}
	var w written
	var e entry
	for range fence.UpdateAttempts {
		var err error
		if e, err = s.read(ctx, ProbeKey); err != nil {
			return fmt.Errorf("jsfence: revision probe: %w", err)
		}
		if w, err = s.writeIf(ctx, opPut, ProbeKey, e.rev, 1, true, nil); err != nil {
			return fmt.Errorf("jsfence: revision probe: %w", err)
		}
		if w.ok {
			break
		}
	}
	if !w.ok {
		return fmt.Errorf("jsfence: revision probe: %w", conflictError(ProbeKey, 1))
	}
	// Both conditions below name a revision before w's: neither can hold,
	// whatever other probes write meanwhile.
	for _, rev := range []uint64{e.rev, 0} {
		again, err := s.writeIf(ctx, opPut, ProbeKey, rev, 1, true, nil)
		if err != nil {
			return fmt.Errorf("jsfence: revision probe: %w", err)
		}
		if again.ok {
			return fmt.Errorf("%w: a write expecting revision %d landed after revision %d (key %q)", ErrRevisionsIgnored, rev, w.rev, s.prefix+ProbeKey)
		}
	}
	return nil
}
