// Command fencelock runs programs under a fenced etcd lock or as the elected
// leader, and shows and breaks locks.
//
//	fencelock run [flags] NAME -- CMD [ARGS...]     run CMD while holding lock NAME
//	fencelock run --read NAME -- CMD [ARGS...]      ... as one of its readers
//	fencelock run --permits N NAME -- CMD [ARGS...] ... with one of semaphore NAME's N permits
//	fencelock elect [flags] NAME -- CMD [ARGS...]   run CMD while leading election NAME
//	fencelock status [--json] [NAME...]             holders and waiters
//	fencelock status --watch [NAME...]              ... followed live, with an etcd watch
//	fencelock break NAME --token N                  free a stuck lock, by its holder's token
//
// The child gets the fencing token in FENCELOCK_TOKEN (the create revision
// of the lock's key) and is stopped, SIGTERM then SIGKILL, when the lock is
// lost. Pass the token to every write the child makes, e.g.
//
//	fencelock run nightly-report -- sh -c '
//	  tag=$(psql "$DSN" -v ON_ERROR_STOP=1 -c "UPDATE reports SET state = 1, fence = $FENCELOCK_TOKEN WHERE id = 1 AND fence <= $FENCELOCK_TOKEN") || exit
//	  [ "$tag" = "UPDATE 1" ] || { echo "refused: a newer holder wrote row 1" >&2; exit 1; }'
//
// psql exits 0 after an UPDATE that matched no row; the script does not, so
// a refused write is not reported as success.
//
// Connection flags and environment variables follow etcdctl's; see
// fencelock help.
//
// Exit status: the command's own (128+N when a signal N ended it), or 64
// for bad usage, 69 when etcd cannot be reached or refuses the request, 75
// when the lock was not acquired (held, with --try; or --wait elapsed), 78
// when a semaphore is in use with another number of permits than
// --permits, 79 when the lock or leadership was lost while the command ran
// (it was stopped), 126 or 127 when the command cannot be started (127: not
// found; 126: found but not executable, as a shell's).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit statuses of fencelock itself (sysexits.h numbers where one fits).
const (
	exitUsage       = 64  // EX_USAGE: bad flags or arguments
	exitUnavailable = 69  // EX_UNAVAILABLE: etcd cannot be reached, or refused the request
	exitNotAcquired = 75  // EX_TEMPFAIL: held by another (--try), or --wait elapsed
	exitPermits     = 78  // EX_CONFIG: others use the semaphore with another number of permits
	exitLost        = 79  // the lock or leadership was lost while the command ran
	exitCannotExec  = 126 // the command was found but cannot be executed, as a shell's
	exitNoCommand   = 127 // the command was not found, as a shell's
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// exitError carries fencelock's exit status with the line it prints.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// childExit is the exit status of the child, passed on as fencelock's.
type childExit int

func (c childExit) Error() string { return fmt.Sprintf("command exited with status %d", int(c)) }

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var ce childExit
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return int(ce)
	case errors.As(err, &ee):
		fmt.Fprintln(stderr, "fencelock:", ee.err)
		return ee.code
	default: // cobra's own: unknown flag or command, bad arguments
		fmt.Fprintf(stderr, "fencelock: %v (see fencelock help)\n", err)
		return exitUsage
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	var g globals
	root := &cobra.Command{
		Use:   "fencelock",
		Short: "Run programs under fenced etcd locks and elections; show who holds every kind of name, and break holders",
		Long: `fencelock runs a program while it holds an etcd lock (run) or leads an
election (elect), stopping it when the lock is lost, and passes it the lock's
fencing token, which every write it makes should carry so that storage can
refuse a late write from a holder that lost the lock; run --read shares the
lock with other readers, run --permits N takes one of a semaphore's N
permits. status shows holders and waiters; break frees a stuck lock (or
permit) by its holder's token; check compares a resource's highest
accepted token with etcd's revision, after a restore or a rebuild of etcd.

Connection flags accept, when not given, FENCELOCK_* environment variables
and then etcdctl's ETCDCTL_* ones (FENCELOCK_ENDPOINTS, then
ETCDCTL_ENDPOINTS, ...; FENCELOCK_* take precedence). --prefix, --ttl and
--owner are FENCELOCK_PREFIX, FENCELOCK_TTL and FENCELOCK_OWNER.

Exit status: the command's own (128+N when signal N ended it); 64 bad usage;
69 etcd unreachable or refusing; 75 lock not acquired (--try, --wait);
78 semaphore in use with other permits than --permits; 79 lock or
leadership lost while the command ran; 127 the command cannot be started:
not found (126: found, but not executable, as a shell's).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.resolve(cmd)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	g.register(root)
	root.AddCommand(newRunCmd(&g), newElectCmd(&g), newStatusCmd(&g), newBreakCmd(&g), newCheckCmd(&g))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	return root
}
