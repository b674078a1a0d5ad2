package etcdlocktest

import (
	"errors"
	"fmt"
)

// Option configures a [Server]. Options are created by the With… functions.
type Option interface {
	apply(*options)
}

type options struct {
	members   int
	processes bool // members run as processes of their own
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithMembers runs an n-member cluster, each member its own OS process (the
// test binary re-executed, see the package doc), so that [Server.StopMember]
// can crash one. Default: one member inside the test process, which starts
// faster but cannot be stopped on its own. n < 1 makes [Start] and [New]
// fail.
func WithMembers(n int) Option {
	return optionFunc(func(o *options) { o.members, o.processes = n, true })
}

func newOptions(opts []Option) (options, error) {
	o := options{members: 1}
	for _, opt := range opts {
		if opt == nil {
			return o, errors.New("etcdlocktest: nil Option")
		}
		opt.apply(&o)
	}
	if o.members < 1 {
		return o, fmt.Errorf("etcdlocktest: WithMembers(%d): want at least 1", o.members)
	}
	return o, nil
}
