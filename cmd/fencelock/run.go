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
	read      bool // as a reader (RLock)
	permits   int  // a permit of a semaphore of this many (0: the lock)
	semaphore bool // --permits given
	minHold   time.Duration
}

func newRunCmd(g *globals) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] NAME -- CMD [ARGS...]",
		Short: "Run a command while holding lock NAME (or as a reader, or with a permit)",
		Long: `run takes lock NAME (waiting in arrival order, up to --wait; --try gives up
at once), runs CMD with its stdio passed through, and releases the lock when
CMD exits. With --read it takes the lock as a reader: readers of NAME run
together, a plain run of NAME (a writer) runs alone, and a waiting writer
holds back the readers that come after it. With --permits N it takes one of
the N permits of semaphore NAME instead (semaphores are apart from locks of
the same name): at most N runs of NAME at once. CMD gets in its environment:

  FENCELOCK_TOKEN  the fencing token: the create revision of the lock's key,
                   greater than every earlier holder's. Put it in every write
                   CMD makes (e.g. UPDATE ... WHERE fence <= $FENCELOCK_TOKEN),
                   so that storage refuses CMD's writes once a newer holder wrote.
  FENCELOCK_NAME   the lock's name
  FENCELOCK_KEY    the lock's etcd key
  FENCELOCK_LEASE  the session lease, in hex as etcdctl prints it
  FENCELOCK_TTL    the granted lease TTL, in seconds
  FENCELOCK_SLOT   with --permits: the permit's slot, 0 to N-1, held by one
                   run at a time. FENCELOCK_TOKEN is then the slot's token,
                   greater than every earlier holder's of the same slot
                   only: fence a resource owned by slot i (shard i) with it,
                   not a resource every slot writes to (holders of other
                   slots run at the same time with unrelated tokens).
  FENCELOCK_PERMITS with --permits: N

A reader's FENCELOCK_TOKEN is greater than every earlier writer's, and a
writer's greater than every earlier holder's, readers included; readers
running together carry different tokens, so do not fence a resource that
readers write to with "refuse anything lower" across readers.

When the lock is lost (the lease expired or no keepalive was acknowledged by
its validity deadline, or the key was deleted, e.g. by fencelock break), CMD's
process group gets SIGTERM, then SIGKILL after --kill-after, and fencelock
exits 79. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to fencelock are passed on
to CMD's process group; one that comes before CMD started (while fencelock
waits for the lock, or as it gets it) ends fencelock with 128+N, CMD never
started and the lock released at once. CMD is killed if fencelock itself is
killed.

Every argument after NAME is CMD's, flags included, with or without "--"
(as with etcdctl lock, env or timeout): in "fencelock run job sh -c '...'
--ttl 5s" the --ttl goes to sh and sets no TTL. Put fencelock's flags before
NAME. Without "--" right after NAME, fencelock notes on stderr a flag of its
own that it finds between NAME and the next "--"; a CMD that is itself one of
fencelock's flags ("run job --ttl 5s -- true") is refused as bad usage.
With --min-hold D, the lock's key stays in etcd until at least D after the
lock was taken, however soon CMD exits and fencelock with it: a job run from
cron on several machines (fencelock run --try --min-hold 50m job -- CMD,
every hour) runs once per period even when it takes a millisecond and the
clocks differ by less than D. If fencelock is killed while CMD runs, the
lock goes with its lease as without the flag. A semaphore (--permits) has
no minimum hold.

--try and --wait contradict: given both, run refuses them (as etcdctl
refuses contradicting flags) rather than let one silently win; so do --read
and --permits (a semaphore has no readers).

Exit status: CMD's (128+N when signal N ended it); 75 when the lock was not
acquired (--try found it held, or --wait elapsed); 79 when it was lost while
CMD ran; 78 when other runs or programs use semaphore NAME with another
number of permits than --permits (they must agree; the message says theirs);
69 when etcd cannot be reached or refuses; 64 for bad usage (--permits
outside 1 to 1024 among it); 127 when CMD cannot be started because it
was not found, 126 when it was found but cannot be executed (as a shell's).
fencelock looks CMD up before it takes the lock, and a CMD that still fails
to start (a missing interpreter, a binary for another machine) releases the
lock at once, --min-hold or not: the hold is for a job that ran. A CMD that
started and then exited 126 or 127 itself (sh -c 'missing-program') did
start, may have done part of its work, and keeps the hold.`,
		Example: `  fencelock run --wait 30s nightly-report -- ./report.sh
  fencelock run --try nightly-report -- sh -c '
    tag=$(psql "$DSN" -v ON_ERROR_STOP=1 -c "UPDATE reports SET state = 1, fence = $FENCELOCK_TOKEN WHERE id = 1 AND fence <= $FENCELOCK_TOKEN") || exit
    [ "$tag" = "UPDATE 1" ] || { echo "refused: a newer holder wrote row 1" >&2; exit 1; }'   # UPDATE 0 is not success
  fencelock run --read config -- ./read-config.sh
  fencelock run --permits 4 workers -- sh -c './work.sh --shard "$FENCELOCK_SLOT" --fence "$FENCELOCK_TOKEN"'`,
		Args: nameAndCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			noteFlagsAfterName(cmd, args)
			name, argv := splitCommand(args)
			o.semaphore = cmd.Flags().Changed("permits")
			return runLocked(cmd.Context(), g, o, name, argv, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().SetInterspersed(false) // flags after NAME belong to CMD
	f := cmd.Flags()
	f.DurationVar(&o.wait, "wait", 0, "give up waiting for the lock after this long (0: wait until interrupted)")
	f.BoolVar(&o.try, "try", false, "fail at once (exit 75) if the lock is held or waited for; not with --wait")
	f.DurationVar(&o.killAfter, "kill-after", 10*time.Second, "after the lock is lost, SIGKILL CMD this long after SIGTERM")
	f.StringVar(&o.metadata, "metadata", "", "text stored with the lock for status to show (at most 4 KiB)")
	f.BoolVar(&o.read, "read", false, "take the lock as a reader: readers run together, writers (run without --read) alone")
	f.IntVar(&o.permits, "permits", 0, "take a permit of semaphore NAME of this many permits (1 to 1024; every run of NAME must agree) instead of the lock")
	f.DurationVar(&o.minHold, "min-hold", 0, "keep the lock until at least this long after it was taken, even once CMD exited (0: release when CMD exits)")
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
	return validName(cmd, name)
}

// validName refuses a NAME the library would refuse, as bad usage (64),
// before anything is dialled, for every command.
func validName(cmd *cobra.Command, name string) error {
	err := etcdlock.ValidateName(name)
	if err == nil {
		return nil
	}
	what := "lock name"
	switch f := cmd.Flags(); {
	case cmd.Name() == "elect" || f.Changed("election"):
		what = "election name"
	case f.Changed("permits") || f.Changed("semaphore"):
		what = "semaphore name"
	case cmd.Name() == "status":
		what = "name"
	}
	return bad("%s: %s %q: %v", cmd.Name(), what, name, err)
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
	case o.minHold < 0 || o.minHold > etcdlock.MaxMinHold:
		return bad("--min-hold %v: must be between 0 and %v", o.minHold, etcdlock.MaxMinHold)
	case o.try && o.wait > 0:
		return bad("--try and --wait %v cannot be set at the same time, choose one", o.wait)
	case o.semaphore && o.read:
		return bad("--read and --permits cannot be set at the same time: a semaphore has no readers")
	case o.semaphore && o.minHold > 0:
		return bad("--min-hold and --permits cannot be set at the same time: a semaphore has no minimum hold")
	case o.semaphore && (o.permits < 1 || o.permits > etcdlock.MaxPermits):
		return bad("--permits %d: want 1 to %d", o.permits, etcdlock.MaxPermits)
	}
	if err := findCommand(argv); err != nil {
		return err // before the lock is taken: no one else is kept from it
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
	env := childEnv(name, lock.Key(), lock.Token(), lock.Lease(), lock.TTL())
	if o.semaphore {
		env = append(env, "FENCELOCK_SLOT="+strconv.Itoa(lock.Slot()), "FENCELOCK_PERMITS="+strconv.Itoa(o.permits))
	}
	if startHook != nil {
		startHook(sigs)
	}
	c, err := sigs.start(argv, env)
	switch {
	case errors.Is(err, errInterrupted):
		return interruptedBeforeStart(lock, o, name, sigs, stderr)
	case err != nil:
		return notStarted(lock, o, name, argv[0], err, stderr)
	}
	if supervise(c, sigs, lock.Done(), o.killAfter) {
		closeLocks = func() {} // no wait for a revoke through a link that may be cut: the lease is gone or expiring
		return fail(exitLost, "%s (token %d) lost while the command ran: %v; the command was stopped", o.what(name, lock), lock.Token(), lock.Err())
	}
	if err := unlock(lock.Unlock); errors.Is(err, etcdlock.ErrLost) {
		fmt.Fprintf(stderr, "fencelock: the command exited with status %d, but %v\n", c.status(), err)
		return fail(exitLost, "%s (token %d) was lost before the command ended", o.what(name, lock), lock.Token())
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
	lock, err := take(actx, locks, o, name)
	switch {
	case err == nil:
		return lock, nil
	case sigs.received() != 0:
		return nil, sigs.interrupted(fmt.Sprintf("waiting for %s", o.what(name, nil)))
	case errors.Is(err, etcdlock.ErrPermits):
		return nil, fail(exitPermits, "%s", permitsMismatch(ctx, locks, o, name))
	case errors.Is(err, etcdlock.ErrLocked) && o.semaphore:
		return nil, fail(exitNotAcquired, "%s: every permit is held or waited for%s", o.what(name, nil), heldBy(ctx, locks, o, name))
	case errors.Is(err, etcdlock.ErrLocked):
		return nil, fail(exitNotAcquired, "%v", err)
	case errors.Is(err, context.DeadlineExceeded) && o.wait > 0 && ctx.Err() == nil:
		return nil, fail(exitNotAcquired, "%s not acquired within --wait %v%s", o.what(name, nil), o.wait, heldBy(ctx, locks, o, name))
	case errors.Is(err, etcdlock.ErrInvalidName):
		return nil, bad("lock name %q: %v", name, err)
	case errors.Is(err, etcdlock.ErrInvalidData):
		return nil, bad("%v", err)
	default:
		return nil, fail(exitUnavailable, "%s: %v", o.what(name, nil), err)
	}
}

// take is the library call the flags ask for.
func take(ctx context.Context, locks *etcdlock.Client, o runOptions, name string) (*etcdlock.Lock, error) {
	md := etcdlock.WithMetadata(o.metadata)
	hold := etcdlock.WithMinHold(o.minHold)
	switch {
	case o.semaphore:
		sm, err := locks.Semaphore(name, o.permits)
		if err != nil {
			return nil, err
		}
		if o.try {
			return sm.TryAcquire(ctx, md)
		}
		return sm.Acquire(ctx, md)
	case o.read && o.try:
		return locks.TryRLock(ctx, name, md, hold)
	case o.read:
		return locks.RLock(ctx, name, md, hold)
	case o.try:
		return locks.TryLock(ctx, name, md, hold)
	default:
		return locks.Lock(ctx, name, md, hold)
	}
}

// what names what run takes (or holds, when lock is not nil), for messages.
func (o runOptions) what(name string, lock *etcdlock.Lock) string {
	switch {
	case o.semaphore && lock != nil:
		return fmt.Sprintf("permit of semaphore %q (slot %d of %d)", name, lock.Slot(), o.permits)
	case o.semaphore:
		return fmt.Sprintf("a permit of semaphore %q (%d permits)", name, o.permits)
	case o.read:
		return fmt.Sprintf("lock %q as a reader", name)
	}
	return fmt.Sprintf("lock %q", name)
}

// heldBy names the holders of what run waited for, when it can read them
// within 2 s: " (held by ...)".
func heldBy(ctx context.Context, locks *etcdlock.Client, o runOptions, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var holders []etcdlock.Entry
	if o.semaphore {
		sq, err := locks.InspectSemaphore(ctx, name)
		if err != nil {
			return ""
		}
		holders = sq.Holders
	} else if q, err := locks.Inspect(ctx, name); err == nil {
		holders = q.Holders
	}
	if len(holders) == 0 {
		return ""
	}
	var names []string
	for _, h := range holders {
		names = append(names, h.String())
	}
	return " (held by " + strings.Join(names, ", ") + ")"
}

// permitsMismatch says that others use semaphore name with other permits.
func permitsMismatch(ctx context.Context, locks *etcdlock.Client, o runOptions, name string) string {
	theirs := "another number of"
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if sq, err := locks.InspectSemaphore(ctx, name); err == nil && sq.Permits > 0 && sq.Permits != o.permits {
		theirs = strconv.Itoa(sq.Permits)
	}
	return fmt.Sprintf("semaphore %q is in use with %s permits, not --permits %d: every run of a semaphore must give the same --permits", name, theirs, o.permits)
}

// notStarted releases the lock of a command that could not be started, at
// once: --min-hold keeps the name for a job that ran, and this one never
// began, so holding it would only stop every other machine from running
// the job this period. A command that started and then exited 126 or 127
// itself (a shell that could not find what it was told to run) did begin,
// and may have done part of its work: its lock keeps the hold.
func notStarted(lock *etcdlock.Lock, o runOptions, name, cmdName string, err error, stderr io.Writer) error {
	if uerr := unlock(lock.UnlockNow); uerr != nil {
		fmt.Fprintf(stderr, "fencelock: %v\n", uerr)
	}
	note := ""
	if o.minHold > 0 {
		note = fmt.Sprintf(" (%s released at once, not kept for --min-hold %v: the command never started)", o.what(name, lock), o.minHold)
	}
	return startFailed(cmdName, err, note)
}

// interruptedBeforeStart is the exit for a signal that came as the lock
// was taken, before the command was started: the command is not started,
// and the lock is released at once (with UnlockNow: the job never began).
func interruptedBeforeStart(lock *etcdlock.Lock, o runOptions, name string, sigs *signals, stderr io.Writer) error {
	if err := unlock(lock.UnlockNow); err != nil {
		fmt.Fprintf(stderr, "fencelock: %v\n", err)
	}
	return sigs.interrupted(fmt.Sprintf("%s (token %d) taken, released at once, the command not started", o.what(name, lock), lock.Token()))
}

// startHook, when set, is called just before the command is started. Only
// the tests set it (main_test.go), in the fencelock process they run, to
// send a signal at that point.
var startHook func(*signals)

// unlock calls release (Unlock or UnlockNow), bounded.
func unlock(release func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return release(ctx)
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
