package dynamofence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// ProbePrefix begins the keys [Store.CheckConditions] writes.
const ProbePrefix = "fencelock-probe/"

// CheckConditions makes sure the server refuses a write whose condition
// fails, as every fenced write needs: it writes a fresh probe item (under
// [ProbePrefix]) with token 2, then with token 1, and returns an error
// matching [ErrConditionsUnsupported] if the second write landed. AWS's
// DynamoDB always passes; run it once at start against a
// DynamoDB-compatible server (an emulator, a proxy). The probe item stays,
// with its floor: delete it if you like.
func (s *Store) CheckConditions(ctx context.Context) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := ProbePrefix + hex.EncodeToString(b[:])
	if err := s.Put(ctx, key, 2, []byte("probe 2")); err != nil {
		return fmt.Errorf("dynamofence: condition probe: %w", err)
	}
	err := s.Put(ctx, key, 1, []byte("probe 1"))
	if errors.Is(err, fence.ErrStale) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamofence: condition probe: %w", err)
	}
	return fmt.Errorf("%w: a write with token 1 landed over token 2 (probe item %q)", ErrConditionsUnsupported, key)
}
