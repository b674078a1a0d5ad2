package childproc

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrExited means the process exited before it was ready: most likely a
// server whose port was taken between choosing and binding it.
var ErrExited = errors.New("childproc: exited before it was ready")

// readyEvery is how often AwaitReady asks; readyTry bounds each question.
const (
	readyEvery = 10 * time.Millisecond
	readyTry   = time.Second
)

// AwaitReady asks ready, each time bounded by a second, every 10 ms until
// it returns nil: for a server that says nothing when it is ready that one
// could wait on. It returns an error matching [ErrExited] when the process
// exits first, or ctx's error when ctx ends first; both carry the
// process's output and, for ctx, ready's last error. It leaves the
// process running either way.
func (p *Proc) AwaitReady(ctx context.Context, ready func(context.Context) error) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, readyTry)
		err := ready(tctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%w: %s: %v: %s", ErrExited, p.Name(), p.Err(), p.Output())
		case <-ctx.Done():
			return fmt.Errorf("childproc: %s not answering: %w (last: %v): %s", p.Name(), ctx.Err(), err, p.Output())
		case <-time.After(readyEvery): // poll: see the comment above
		}
	}
}
