package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/etcdlock"
)

type electOptions struct {
	value        string
	killAfter    time.Duration
	restart      bool
	restartDelay time.Duration
	healthAddr   string
}

func newElectCmd(g *globals) *cobra.Command {
	var o electOptions
	cmd := &cobra.Command{
		Use:   "elect [flags] NAME -- CMD [ARGS...]",
		Short: "Run a command only while leading election NAME",
		Long: `elect campaigns in election NAME (candidates lead in arrival order) and runs
CMD while this instance leads, with the same environment as run
(FENCELOCK_TOKEN is the term's fencing token). When leadership is lost, CMD's
process group gets SIGTERM, then SIGKILL after --kill-after.

Without --restart, elect exits when CMD exits (with CMD's status; elect
resigns so the next candidate leads at once) or when leadership is lost
(79). With --restart it campaigns again after either, and runs CMD again each
time it leads, until a signal stops it. SIGINT, SIGTERM, SIGHUP and SIGQUIT
are passed on to CMD while it runs (and elect then exits when CMD does);
while campaigning they stop elect (128+N).

--value is published as the candidate's value (status shows it).

--health-addr serves http://ADDR/healthz for a liveness probe, from start
to exit: 200 "ok" while campaigning or leading; 503 with the reason when
CMD is still running --kill-after + 5s after the term ended or after its
validity deadline passed (a wedged leader: CMD survived SIGKILL, e.g. in
uninterruptible sleep on a hung mount, or fencelock itself is stuck). A
fencelock that is stopped (SIGSTOP) or frozen cannot answer at all: the
probe's timeout is then the signal.

As with run, every argument after NAME is CMD's, flags included: put
elect's flags before NAME (a CMD that is one of them is bad usage).

Exit status: as for run.`,
		Example: `  fencelock elect --restart --value "$(hostname)" scheduler -- ./scheduler`,
		Args:    nameAndCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			noteFlagsAfterName(cmd, args)
			name, argv := splitCommand(args)
			return runElected(cmd.Context(), g, o, name, argv, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringVar(&o.value, "value", "", "the candidate's value, for status and observers (at most 4 KiB)")
	f.DurationVar(&o.killAfter, "kill-after", 10*time.Second, "after leadership is lost, SIGKILL CMD this long after SIGTERM")
	f.BoolVar(&o.restart, "restart", false, "keep campaigning after CMD exits or leadership is lost, and run CMD again each time this instance leads")
	f.DurationVar(&o.restartDelay, "restart-delay", time.Second, "with --restart, the pause after CMD exited on its own before campaigning again")
	f.StringVar(&o.healthAddr, "health-addr", "", "serve leader health for a liveness probe at http://ADDR/healthz, e.g. :8081 (503 while CMD runs past the term)")
	return cmd
}

// termOutcome is how one term's command ended.
type termOutcome struct {
	ran      bool
	status   int
	lost     error // the term ended first: why
	signaled bool  // a signal was passed on to the command
}

func runElected(ctx context.Context, g *globals, o electOptions, name string, argv []string, stderr io.Writer) error {
	if o.killAfter <= 0 || o.restartDelay < 0 {
		return bad("--kill-after must be positive and --restart-delay not negative")
	}
	if err := findCommand(argv); err != nil {
		return err // before campaigning: a leader that cannot run it leads for nothing
	}
	runOpts := []etcdlock.RunOption{etcdlock.WithErrorHandler(func(err error) { fmt.Fprintln(stderr, "fencelock:", err) })}
	if o.healthAddr != "" {
		health, stop, err := serveHealth(o.healthAddr, o.killAfter)
		if err != nil {
			return err
		}
		defer stop()
		runOpts = append(runOpts, health)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := catchSignals(cancel)
	defer sigs.stop()
	locks, closeLocks, err := g.connect(rctx)
	if err != nil {
		if sigs.received() != 0 {
			return sigs.interrupted("connecting to etcd")
		}
		return err
	}
	defer func() { closeLocks() }()
	var last termOutcome
	var startErr error
	err = locks.Run(rctx, name, o.value, func(tctx context.Context, term *etcdlock.Term) error {
		if rctx.Err() != nil {
			return nil // a signal came as the term began
		}
		c, err := sigs.start(argv, childEnv(name, term.Key(), term.Token(), term.Lease(), term.TTL()))
		if errors.Is(err, errInterrupted) {
			return nil // a signal came as the term began
		}
		if err != nil {
			startErr = err
			cancel()
			return nil
		}
		last = termOutcome{ran: true}
		if supervise(c, sigs, tctx.Done(), o.killAfter) {
			last.lost = context.Cause(tctx)
			fmt.Fprintf(stderr, "fencelock: leadership of %q (token %d) lost: %v; the command was stopped\n", name, term.Token(), last.lost)
		}
		last.status, last.signaled = c.status(), sigs.received() != 0
		if last.signaled || !o.restart {
			cancel()
			return nil
		}
		if last.lost == nil {
			wait(tctx, o.restartDelay)
		}
		return nil
	}, runOpts...)
	ran := last.ran
	switch {
	case startErr != nil:
		return startFailed(argv[0], startErr, "")
	case errors.Is(err, etcdlock.ErrInvalidName):
		return bad("election name %q: %v", name, err)
	case errors.Is(err, etcdlock.ErrInvalidData):
		return bad("%v", err)
	case !errors.Is(err, context.Canceled):
		return fail(exitUnavailable, "election %q: %v", name, err)
	case ran && last.lost != nil && !last.signaled:
		closeLocks = func() {} // no wait for a revoke through a link that may be cut
		return fail(exitLost, "election %q: leadership lost while the command ran", name)
	case ran:
		return childExit(last.status)
	default: // stopped by a signal while campaigning
		return sigs.interrupted(fmt.Sprintf("campaigning in election %q", name))
	}
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
