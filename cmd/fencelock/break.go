package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

func newBreakCmd(g *globals) *cobra.Command {
	var token int64
	var election bool
	cmd := &cobra.Command{
		Use:   "break [--election] NAME --token N",
		Short: "Free a stuck lock by deleting its holder's key, if its token is still N",
		Long: `break deletes the key of lock NAME's holder (with --election: the election's
leader), but only if the holder's fencing token is still N (see status): a
break that arrives late, or after the holder changed, deletes nothing. The next
waiter then gets the lock with a greater token.

The old holder may still be running. If it is alive and reaches etcd, it
learns within about 150 ms that its key is gone (fencelock run stops its
command, exit 79). Until a newer holder has written to a fenced resource, the
old holder's writes can still land there; from then on, the resource refuses
every write with token N or lower. Writes to unfenced resources are not
protected at all.

A lock and an election of the same name are apart: break NAME looks only at
the lock, break --election NAME only at the election. When N is not the
holder's token but is that of the other one's holder, the message says so.

Exit status: 0 when the key was deleted; 75 when N is not the holder's token
(nothing was deleted); 69, 64 as for run.`,
		Example: `  fencelock status nightly-report   # note the holder's TOKEN
  fencelock break nightly-report --token 812
  fencelock break --election scheduler --token 790`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("token") {
				return bad("break: --token is required (the holder's token, from fencelock status)")
			}
			return breakLock(cmd.Context(), g, args[0], fence.Token(token), election, cmd.OutOrStdout())
		},
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the holder's fencing token, as status shows it (required)")
	cmd.Flags().BoolVar(&election, "election", false, "break the leader of election NAME instead of a lock's holder")
	return cmd
}

func breakLock(ctx context.Context, g *globals, name string, token fence.Token, election bool, out io.Writer) error {
	if !token.Valid() {
		return bad("break: --token %d is not a token (tokens are positive)", token)
	}
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	brk, what := locks.Break, "lock"
	if election {
		brk, what = locks.BreakElection, "election"
	}
	e, err := brk(ctx, name, token)
	switch {
	case errors.Is(err, etcdlock.ErrNotHolder):
		return fail(exitNotAcquired, "%v; nothing was deleted%s", err, otherKindHint(ctx, locks, name, token, election))
	case errors.Is(err, etcdlock.ErrInvalidName):
		return bad("%v", err)
	case err != nil:
		return fail(exitUnavailable, "%v", err)
	}
	fmt.Fprintf(out, "deleted %s %q's key %s (token %d, owner %s).\n", what, name, e.Key, e.Token, e.OwnerOrUnknown())
	fmt.Fprintf(out, "The old holder, if still running, learns it within about 150 ms when it reaches etcd.\n")
	fmt.Fprintf(out, "Fenced resources refuse its writes (token %d) once the next holder has written to them; unfenced ones do not.\n", e.Token)
	return nil
}

// otherKindHint returns a hint when the token that break did not find is
// the holder's of the other kind of queue of the same name: a lock's when
// breaking an election, an election's leader's when breaking a lock. Locks
// and elections of one name are apart, and the token is what tells which
// one the user read off status.
func otherKindHint(ctx context.Context, locks *etcdlock.Client, name string, token fence.Token, election bool) string {
	inspect, what, flag := locks.InspectElection, "an election", "use --election"
	if election {
		inspect, what, flag = locks.Inspect, "a lock", "leave out --election"
	}
	q, err := inspect(ctx, name)
	if err != nil || q.Holder == nil || q.Holder.Token != token {
		return ""
	}
	role := "has a leader"
	if election {
		role = "has a holder"
	}
	return fmt.Sprintf("; %s %q %s with token %d: %s", what, name, role, token, flag)
}
