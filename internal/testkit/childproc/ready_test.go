package childproc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// TestAwaitReady: AwaitReady returns once ready answers, says so when the
// process exits first, and gives up when its context ends.
func TestAwaitReady(t *testing.T) {
	errNo := errors.New("not yet")
	t.Run("ready on the third question", func(t *testing.T) {
		p := start(t, childConfig{}, nil)
		n := 0
		err := p.AwaitReady(t.Context(), func(context.Context) error {
			if n++; n < 3 {
				return errNo
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("got %v after %d questions, want nil after 3", err, n)
		}
	})
	t.Run("exited", func(t *testing.T) {
		p := start(t, childConfig{Exit: true}, nil)
		err := p.AwaitReady(t.Context(), func(context.Context) error { return errNo })
		if !errors.Is(err, childproc.ErrExited) {
			t.Fatalf("got %v, want an error matching ErrExited", err)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		p := start(t, childConfig{}, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		err := p.AwaitReady(ctx, func(context.Context) error { return errNo })
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, childproc.ErrExited) {
			t.Fatalf("got %v, want an error matching context.DeadlineExceeded", err)
		}
	})
}
