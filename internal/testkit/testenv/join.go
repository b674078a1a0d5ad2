package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// errJoinedUnavailable is the Unavailable of a [Join]ed Main.
var errJoinedUnavailable = errors.New("a server is unavailable")

// Join returns one Main for a package whose tests share several servers
// (PostgreSQL and etcd: pgtest.Main(m) and embedetcd.Main(m)): its Start
// starts each in the order given, stopping those already started when one
// fails; its Set tells each Main of its own server (or of why there is
// none); a server that is unavailable makes the joined one unavailable, as
// [Main.Run] handles. Each Main's own M is not used: m is run.
func Join(m *testing.M, mains ...Main) Main {
	var how []string
	for _, w := range mains {
		if w.HowToEnable != "" {
			how = append(how, w.Name+": "+w.HowToEnable)
		}
	}
	j := &joined{mains: mains}
	return Main{M: m, Name: "testenv.Join", Start: j.start, Unavailable: errJoinedUnavailable,
		HowToEnable: strings.Join(how, "; "), Set: j.set}
}

type joined struct {
	mains []Main
	errs  []error // each Main's error from the last start, for its Set
}

// servers is the joined Mains' servers, closed in reverse order.
type servers []io.Closer

func (s servers) Close() error {
	var errs []error
	for i := len(s) - 1; i >= 0; i-- {
		errs = append(errs, s[i].Close())
	}
	return errors.Join(errs...)
}

func (j *joined) start(ctx context.Context) (io.Closer, error) {
	j.errs = make([]error, len(j.mains))
	var srvs servers
	for _, w := range j.mains {
		c, err := w.Start(ctx)
		if err != nil {
			srvs.Close()
			for k := range j.errs {
				j.errs[k] = err // each Main's tests learn why they have no server
			}
			if w.Unavailable != nil && errors.Is(err, w.Unavailable) {
				return nil, fmt.Errorf("%w: %s: %w", errJoinedUnavailable, w.Name, err)
			}
			return nil, fmt.Errorf("%s: %w", w.Name, err)
		}
		srvs = append(srvs, c)
	}
	return srvs, nil
}

func (j *joined) set(c io.Closer, err error) {
	srvs, _ := c.(servers)
	for i, w := range j.mains {
		switch {
		case srvs != nil:
			w.Set(srvs[i], nil)
		case err != nil && j.errs != nil:
			w.Set(nil, j.errs[i])
		default:
			w.Set(nil, nil)
		}
	}
}
