package redisholder

import (
	"fmt"

	"github.com/fencelock/fencelock/internal/nilcheck"
)

// Option configures [Obtain] and [New]. The interface is sealed: the
// options are this package's With… functions. They are checked before any
// I/O; an invalid one fails the call with [ErrInvalidArgument].
type Option interface{ apply(*options) }

type options struct {
	tokenKey  string // "": TokenKey(key)
	badKey    bool   // WithTokenKey was given ""
	issuer    string // "": "redis:" and the token key
	badIssuer bool   // WithIssuer was given ""
	unchecked bool   // test only: issue without checking the lock's value
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithTokenKey names the key of the counter the tokens come from. Default:
// [TokenKey] of the lock's key, which is in the lock key's hash slot.
// Every client of one lock must use the same counter, or their tokens
// are not comparable; in a Redis Cluster it must be in the lock key's
// slot (Redis refuses the script otherwise). An empty name is refused.
func WithTokenKey(name string) Option {
	return optionFunc(func(o *options) { o.tokenKey, o.badKey = name, name == "" })
}

// WithIssuer names the source of the lock's tokens for the stores that
// check it ([fence.IssuerNamer]). Default: "redis:" and the counter's key,
// which does not tell two Redis servers with a counter of the same name
// apart: name the server (or cluster) here when several could fence one
// resource. Every client of one lock must give the same name. An empty
// name is refused.
func WithIssuer(name string) Option {
	return optionFunc(func(o *options) { o.issuer, o.badIssuer = name, name == "" })
}

// buildOptions applies and checks opts.
func buildOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if nilcheck.IsNil(opt) {
			return o, fmt.Errorf("%w: nil Option", ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	if o.badIssuer {
		return o, fmt.Errorf("%w: WithIssuer: empty name", ErrInvalidArgument)
	}
	if o.badKey {
		return o, fmt.Errorf("%w: WithTokenKey: empty name", ErrInvalidArgument)
	}
	return o, nil
}
