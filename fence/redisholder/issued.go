package redisholder

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
)

// counterScript reads the counter KEYS[1] (the Client runs scripts only).
var counterScript = redis.NewScript(`return redis.call("get", KEYS[1])`)

// Issued reports whether the counter has issued t: whether its value has
// reached t ([fence.TokenIssuer]). A counter set back (a Redis restarted
// without persistence, a FLUSHALL, an eviction, a failover that lost the
// latest increments) has not: a [fence.Guard]'s write refused for a
// token above the counter then matches [fence.ErrTokenRegressed] as well
// as [fence.ErrStale], telling the reset from a newer holder. ctx bounds
// the request.
func (l *Lock) Issued(ctx context.Context, t fence.Token) (bool, error) {
	if ctx == nil {
		return false, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	n, err := counterScript.Run(ctx, l.client, []string{l.tokenKey}).Int64()
	if errors.Is(err, redis.Nil) {
		n, err = 0, nil // no counter: none issued
	}
	if err != nil {
		return false, fmt.Errorf("redisholder: reading the counter %q: %w", l.tokenKey, err)
	}
	return n > 0 && fence.Token(n) >= t, nil
}
