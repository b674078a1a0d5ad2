package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
)

type runOptions struct {
	wait      time.Duration
	try       bool
	killAfter time.Duration
	metadata  string
}

func newRunCmd(g *globals) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] NAME -- CMD [ARGS...]",
		Short: "Run a command while holding lock NAME",
		Long: `run takes lock NAME (waiting in arrival order, up to --wait; --try gives up
at once), runs CMD with its stdio passed through, and releases the lock when
CMD exits. CMD gets in its environment:

  FENCELOCK_TOKEN  the fencing token: the create revision of the lock's key,
                   greater than every earlier holder's. Put it in every write
                   CMD makes (e.g. UPDATE ... WHERE fence <= $FENCELOCK_TOKEN),
                   so that storage refuses CMD's writes once a newer holder wrote.
  FENCELOCK_NAME   the lock's name
  FENCELOCK_KEY    the lock's etcd key
  FENCELOCK_LEASE  the session lease, in hex as etcdctl prints it
  FENCELOCK_TTL    the granted lease TTL, in seconds

When the lock is lost (the lease expired or no keepalive was acknowledged by
its validity deadline, or the key was deleted, e.g. by fencelock break), CMD's
process group gets SIGTERM, then SIGKILL after --kill-after, and fencelock
exits 79. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to fencelock are passed on
to CMD's process group. CMD is killed if fencelock itself is killed.

Every argument after NAME is CMD's, flags included, with or without "--"
(as with etcdctl lock, env or timeout): in "fencelock run job sh -c '...'
--ttl 5s" the --ttl goes to sh and sets no TTL. Put fencelock's flags before
NAME. Without "--" right after NAME, fencelock notes on stderr a flag of its
own that it finds between NAME and the next "--"; a CMD that is itself one of
fencelock's flags ("run job --ttl 5s -- true") is refused as bad usage.
--try and --wait contradict: given both, run refuses them (as etcdctl
refuses contradicting flags) rather than let one silently win.

Exit status: CMD's (128+N when signal N ended it); 75 when the lock was not
acquired (--try found it held, or --wait elapsed); 79 when it was lost while
CMD ran; 69 when etcd cannot be reached or refuses; 64 for bad usage; 127
when CMD cannot be started.`,
		Example: `  fencelock run --wait 30s nightly-report -- ./report.sh
  fencelock run --try nightly-report -- sh -c \
    'psql "$DSN" -c "UPDATE reports SET state = 1, fence = $FENCELOCK_TOKEN WHERE id = 1 AND fence <= $FENCELOCK_TOKEN"'`,
		Args: nameAndCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			noteFlagsAfterName(cmd, args)
			name, argv := splitCommand(args)
			return runLocked(cmd.Context(), g, o, name, argv, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().SetInterspersed(false) // flags after NAME belong to CMD
	f := cmd.Flags()
	f.DurationVar(&o.wait, "wait", 0, "give up waiting for the lock after this long (0: wait until interrupted)")
	f.BoolVar(&o.try, "try", false, "fail at once (exit 75) if the lock is held or waited for; not with --wait")
	f.DurationVar(&o.killAfter, "kill-after", 10*time.Second, "after the lock is lost, SIGKILL CMD this long after SIGTERM")
	f.StringVar(&o.metadata, "metadata", "", "text stored with the lock for status to show (at most 4 KiB)")
	return cmd
}

// nameAndCommand accepts NAME CMD [ARGS...], with or without "--" between
// them. Flag parsing stops at NAME, so CMD's own flags stay CMD's, as
// etcdctl lock, env and timeout do with theirs: requiring "--" would break
// that habit, and a flag after NAME cannot be told from one of CMD's.
// What it can tell is a CMD that is itself one of fencelock's flags
// ("run job --ttl 5s -- true"): no program is named "--ttl", so that is bad
// usage, refused before the lock is taken. A flag of fencelock's own among
// CMD's arguments is noted on stderr (see flagsAfterName).
func nameAndCommand(cmd *cobra.Command, args []string) error {
	want := "want NAME -- CMD [ARGS...]"
	name, argv := splitCommand(args)
	switch {
	case len(args) == 0:
		return bad("%s: missing NAME and the command to run (%s)", cmd.Name(), want)
	case len(args) == 1 && cmd.ArgsLenAtDash() == 0:
		// "run -- CMD": pflag took the "--", so CMD alone is left.
		return bad("%s: missing NAME before \"--\" (%s)", cmd.Name(), want)
	case len(argv) == 0:
		return bad("%s: missing the command to run after NAME %q (%s)", cmd.Name(), name, want)
	case isOwnFlag(cmd, argv[0]):
		return bad("%s: the command to run, %q, is a fencelock flag: put fencelock's flags before NAME", cmd.Name(), argv[0])
	}
	return nil
}

// splitCommand returns NAME and CMD [ARGS...] of args.
func splitCommand(args []string) (string, []string) {
	if len(args) > 0 && args[0] == "--" { // fencelock run --flag -- NAME CMD
		args = args[1:]
	}
	if len(args) == 0 {
		return "", nil
	}
	name, argv := args[0], args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	return name, argv
}

// flagsAfterName returns the arguments of CMD, up to the first "--", that
// are flags of fencelock's own command cmd (or its parents), when no "--"
// separates NAME from CMD: likely meant for fencelock, though they go to
// CMD. A "--" among them likely ends what was meant for fencelock.
func flagsAfterName(cmd *cobra.Command, args []string) []string {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) < 2 || args[1] == "--" {
		return nil
	}
	var found []string
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if isOwnFlag(cmd, a) {
			found = append(found, a)
		}
	}
	return found
}

// isOwnFlag reports whether a is a long flag of cmd or of its parents.
func isOwnFlag(cmd *cobra.Command, a string) bool {
	name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
	return strings.HasPrefix(a, "--") && name != "" && cmd.Flags().Lookup(name) != nil
}

// noteFlagsAfterName says on stderr that flags of fencelock's own after
// NAME went to the command.
func noteFlagsAfterName(cmd *cobra.Command, args []string) {
	if found := flagsAfterName(cmd, args); len(found) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "fencelock: note: %s after NAME went to the command, not to fencelock; "+
			"put fencelock's flags before NAME, or \"--\" after it to silence this\n", strings.Join(found, " "))
	}
}

func bad(format string, args ...any) error { return fail(exitUsage, format, args...) }

func runLocked(ctx context.Context, g *globals, o runOptions, name string, argv []string, stderr io.Writer) error {
	switch {
	case o.killAfter <= 0:
		return bad("--kill-after %v: must be positive", o.killAfter)
	case o.wait < 0:
		return bad("--wait %v: must not be negative (0, the default, waits until interrupted)", o.wait)
	case o.try && o.wait > 0:
		return bad("--try and --wait %v cannot be set at the same time, choose one", o.wait)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := catchSignals(cancel)
	defer sigs.stop()
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		if sigs.received() != 0 {
			return sigs.interrupted("connecting to etcd")
		}
		return err
	}
	defer func() { closeLocks() }()
	lock, err := acquire(ctx, sigs, locks, o, name)
	if err != nil {
		return err
	}
	c, err := startChild(argv, childEnv(name, lock.Key(), lock.Token(), lock.Lease(), lock.TTL()))
	if err != nil {
		unlock(lock)
		return fail(exitNoCommand, "start %q: %v", argv[0], err)
	}
	if supervise(c, sigs, lock.Done(), o.killAfter) {
		closeLocks = func() {} // no wait for a revoke through a link that may be cut: the lease is gone or expiring
		return fail(exitLost, "lock %q (token %d) lost while the command ran: %v; the command was stopped", name, lock.Token(), lock.Err())
	}
	if err := unlock(lock); errors.Is(err, etcdlock.ErrLost) {
		fmt.Fprintf(stderr, "fencelock: the command exited with status %d, but %v\n", c.status(), err)
		return fail(exitLost, "lock %q (token %d) was lost before the command ended", name, lock.Token())
	} else if err != nil {
		fmt.Fprintf(stderr, "fencelock: %v\n", err)
	}
	return childExit(c.status())
}

// acquire takes the lock as the flags say, turning failures into exits.
func acquire(ctx context.Context, sigs *signals, locks *etcdlock.Client, o runOptions, name string) (*etcdlock.Lock, error) {
	actx := ctx
	if o.wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(actx, o.wait)
		defer cancel()
	}
	var lock *etcdlock.Lock
	var err error
	if o.try {
		lock, err = locks.TryLock(actx, name, etcdlock.WithMetadata(o.metadata))
	} else {
		lock, err = locks.Lock(actx, name, etcdlock.WithMetadata(o.metadata))
	}
	switch {
	case err == nil:
		return lock, nil
	case sigs.received() != 0:
		return nil, sigs.interrupted(fmt.Sprintf("waiting for lock %q", name))
	case errors.Is(err, etcdlock.ErrLocked):
		return nil, fail(exitNotAcquired, "%v", err)
	case errors.Is(err, context.DeadlineExceeded) && o.wait > 0 && ctx.Err() == nil:
		holder := ""
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if q, ierr := locks.Inspect(ictx, name); ierr == nil && q.Holder != nil {
			holder = fmt.Sprintf(" (held by %v)", q.Holder)
		}
		return nil, fail(exitNotAcquired, "lock %q not acquired within --wait %v%s", name, o.wait, holder)
	case errors.Is(err, etcdlock.ErrInvalidName):
		return nil, bad("lock name %q: %v", name, err)
	case errors.Is(err, etcdlock.ErrInvalidData):
		return nil, bad("%v", err)
	default:
		return nil, fail(exitUnavailable, "lock %q: %v", name, err)
	}
}

func unlock(lock *etcdlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return lock.Unlock(ctx)
}

// childEnv is what the child learns about its lock or term.
func childEnv(name, key string, token fence.Token, lease clientv3.LeaseID, ttl time.Duration) []string {
	return []string{
		"FENCELOCK_TOKEN=" + strconv.FormatInt(int64(token), 10),
		"FENCELOCK_NAME=" + name,
		"FENCELOCK_KEY=" + key,
		fmt.Sprintf("FENCELOCK_LEASE=%016x", int64(lease)),
		"FENCELOCK_TTL=" + strconv.FormatInt(int64(ttl/time.Second), 10),
	}
}
