package fence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// cancelling is an UpdateRounds and UpdateAllRounds whose write meets a
// change and ends ctx on the way, as a caller's deadline ending during the
// write's request does.
type cancelling struct {
	cancel         context.CancelFunc
	claims, writes int
}

func (c *cancelling) ClaimRead(context.Context, string, fence.Token) (fence.Record, int, error) {
	c.claims++
	return fence.Record{}, 0, nil
}

func (c *cancelling) WriteIf(context.Context, string, fence.Token, int, []byte) error {
	c.writes++
	c.cancel()
	return fence.ErrChanged
}

func (c *cancelling) ClaimReadAll(_ context.Context, set []fence.Claim) (map[string]fence.Record, int, error) {
	c.claims++
	return map[string]fence.Record{}, 0, nil
}

func (c *cancelling) WriteAllIf(context.Context, []fence.Claim, int, map[string][]byte) error {
	c.writes++
	c.cancel()
	return fence.ErrChanged
}

// TestRunUpdateEndedBetweenRounds: a ctx that ends during a round that met
// a change ends the update with ctx's error before the next round's claim
// is sent, in RunUpdate and RunUpdateAll, whether the rounds wait between
// rounds or not. Without the check the loop claims again with the ended
// ctx (a store that does not look at ctx, as MemoryStore does not, raises
// its floor) and calls fn again.
func TestRunUpdateEndedBetweenRounds(t *testing.T) {
	fn := func(fence.Record) ([]byte, error) { return nil, nil }
	afn := func(map[string]fence.Record) (map[string][]byte, error) { return nil, nil }
	for _, tt := range []struct {
		name string
		run  func(ctx context.Context, c *cancelling) error
	}{
		{"RunUpdate", func(ctx context.Context, c *cancelling) error { return fence.RunUpdate(ctx, c, "k", 1, fn) }},
		{"RunUpdateAll", func(ctx context.Context, c *cancelling) error {
			return fence.RunUpdateAll(ctx, c, []fence.Claim{{Resource: "k", Token: 1}}, afn)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			c := &cancelling{cancel: cancel}
			err := tt.run(ctx, c)
			if !errors.Is(err, context.Canceled) || c.claims != 1 || c.writes != 1 {
				t.Errorf("got %v after %d claims and %d writes, want context.Canceled after 1 and 1", err, c.claims, c.writes)
			}
		})
	}
}
