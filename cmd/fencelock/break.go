package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

func newBreakCmd(g *globals) *cobra.Command {
	var token int64
	var election, semaphore bool
	cmd := &cobra.Command{
		Use:   "break [--election | --semaphore] NAME --token N",
		Short: "Free a stuck lock by deleting its holder's key, if its token is still N",
		Long: `break deletes the key of lock NAME's holder (with --election: the election's
leader; with --semaphore: the holder of a permit of semaphore NAME), but only
if the holder's fencing token is still N (see status): a break that arrives
late, or after the holder changed, deletes nothing. The next waiter then gets
the lock with a greater token.

A lock held by readers (run --read) has several holders: break frees the
one whose token is N, and the others keep reading. A semaphore's N is the
token of the permit's slot (status shows it on the slot-I row; the holder's
run has it as FENCELOCK_TOKEN); break --semaphore deletes the permit's slot
key and the holder's queue key together, so that the next waiter gets that
slot, with a greater token.

The old holder may still be running. If it is alive and reaches etcd, it
learns within about 150 ms that its key is gone (fencelock run stops its
command, exit 79). Until a newer holder has written to a fenced resource, the
old holder's writes can still land there; from then on, the resource refuses
every write with token N or lower. Writes to unfenced resources are not
protected at all.

Names of different kinds are apart, though spelled alike: break NAME
looks only at the lock, break --election NAME only at the election, break
--semaphore NAME only at the semaphore. When N is not the holder's token but
is that of a holder of one of the others, the message says so.

Exit status: 0 when the key was deleted; 75 when N is not the holder's token
(nothing was deleted); 69, 64 as for run.`,
		Example: `  fencelock status nightly-report   # note the holder's TOKEN
  fencelock break nightly-report --token 812
  fencelock break --election scheduler --token 790
  fencelock break --semaphore workers --token 833`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return err
			}
			return validName(cmd, args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("token") {
				return bad("break: --token is required (the holder's token, from fencelock status)")
			}
			if election && semaphore {
				return bad("break: --election and --semaphore cannot be set at the same time, choose one")
			}
			k := kindLock
			if election {
				k = kindElection
			} else if semaphore {
				k = kindSemaphore
			}
			return breakLock(cmd.Context(), g, args[0], fence.Token(token), k, cmd.OutOrStdout())
		},
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the holder's fencing token, as status shows it (required)")
	cmd.Flags().BoolVar(&election, "election", false, "break the leader of election NAME instead of a lock's holder")
	cmd.Flags().BoolVar(&semaphore, "semaphore", false, "break a permit's holder of semaphore NAME instead of a lock's holder")
	return cmd
}

// queueKind is which of a name's queues break looks at.
type queueKind int

const (
	kindLock queueKind = iota
	kindElection
	kindSemaphore
)

// kinds describes each queueKind for break's messages: what it is, what
// its holder is called, and the flag that selects it.
var kinds = [...]struct{ what, role, flag string }{
	kindLock:      {"lock", "has a holder", "leave out --election and --semaphore"},
	kindElection:  {"election", "has a leader", "use --election"},
	kindSemaphore: {"semaphore", "has a permit's holder", "use --semaphore"},
}

func breakLock(ctx context.Context, g *globals, name string, token fence.Token, k queueKind, out io.Writer) error {
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
	brk := [...]func(context.Context, string, fence.Token) (etcdlock.Entry, error){
		kindLock: locks.Break, kindElection: locks.BreakElection, kindSemaphore: locks.BreakSemaphore,
	}[k]
	e, err := brk(ctx, name, token)
	switch {
	case errors.Is(err, etcdlock.ErrNotHolder):
		return fail(exitNotAcquired, "%v; nothing was deleted%s", err, otherKindHint(ctx, locks, name, token, k))
	case errors.Is(err, etcdlock.ErrInvalidName):
		return bad("%v", err)
	case err != nil:
		return fail(exitUnavailable, "%v", err)
	}
	what := kinds[k].what
	if k == kindSemaphore {
		what = fmt.Sprintf("semaphore %q's permit of slot %d", name, e.Slot)
	} else {
		what = fmt.Sprintf("%s %q", what, name)
	}
	fmt.Fprintf(out, "deleted %s: key %s (token %d, owner %s).\n", what, e.Key, e.Token, e.OwnerOrUnknown())
	fmt.Fprintf(out, "The old holder, if still running, learns it within about 150 ms when it reaches etcd.\n")
	fmt.Fprintf(out, "Fenced resources refuse its writes (token %d) once the next holder has written to them; unfenced ones do not.\n", e.Token)
	return nil
}

// otherKindHint returns a hint when the token that break did not find is
// a holder's of another kind of queue of the same name: a lock's, an
// election's leader's or a semaphore permit's. The kinds of one name are
// apart, and the token is what tells which one the user read off status.
func otherKindHint(ctx context.Context, locks *etcdlock.Client, name string, token fence.Token, k queueKind) string {
	for other := range kinds {
		if queueKind(other) == k || !holdsToken(ctx, locks, name, token, queueKind(other)) {
			continue
		}
		d := kinds[other]
		return fmt.Sprintf("; %s %q %s with token %d: %s", withArticle(d.what), name, d.role, token, d.flag)
	}
	return ""
}

// holdsToken reports whether a holder of name's queue of kind k has token.
func holdsToken(ctx context.Context, locks *etcdlock.Client, name string, token fence.Token, k queueKind) bool {
	var q etcdlock.Queue
	var err error
	switch k {
	case kindLock:
		q, err = locks.Inspect(ctx, name)
	case kindElection:
		q, err = locks.InspectElection(ctx, name)
	case kindSemaphore:
		var sq etcdlock.SemaphoreQueue
		sq, err = locks.InspectSemaphore(ctx, name)
		q = sq.Queue
	}
	return err == nil && slices.ContainsFunc(q.Holders, func(e etcdlock.Entry) bool { return e.Token == token })
}

func withArticle(what string) string {
	if what == "election" {
		return "an " + what
	}
	return "a " + what
}
