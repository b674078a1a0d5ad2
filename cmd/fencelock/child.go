package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// child is the command fencelock runs, in a process group of its own so
// that stopping it reaches its children too.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's; read after exited is closed
}

// startChild starts argv with stdio passed through and env added to
// fencelock's environment. The child is killed if fencelock dies
// (PR_SET_PDEATHSIG), so it never runs on without the lock's supervision.
func startChild(argv, env []string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// findCommand refuses, before any lock is taken or election joined, a
// command that cannot be started: not found, or found but not executable.
// Its lookup is exec's own (PATH for a bare name), so a command it accepts
// fails to start only if it changes in between, or if the kernel refuses
// it (a missing interpreter, a binary for another machine): startChild's
// error then, after the lock was taken.
func findCommand(argv []string) error {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return startFailed(argv[0], err, "")
	}
	return nil
}

// startFailed is the exit for a command that could not be started, as a
// shell's (and env's, and timeout's): 127 when it was not found, 126 when
// it was found but could not be executed.
func startFailed(name string, err error, note string) error {
	code := exitCannotExec
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = exitNoCommand
	}
	return fail(code, "start %q: %v%s", name, err, note)
}

// signal sends sig to the child's process group.
func (c *child) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
}

// stop sends SIGTERM to the child's process group, then SIGKILL if the
// child has not exited after killAfter, and waits for it.
func (c *child) stop(killAfter time.Duration) {
	c.signal(syscall.SIGTERM)
	t := time.NewTimer(killAfter)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
		c.signal(syscall.SIGKILL)
		<-c.exited
	}
	c.signal(syscall.SIGKILL) // what is left of the group
}

// status is the child's exit status as a shell reports it: 128+N when
// signal N ended it.
func (c *child) status() int {
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) {
		if c.err != nil {
			return 1
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// forwarded are the signals fencelock passes on to the child.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signals catches the forwarded signals for fencelock's whole life, so that
// none of them kills fencelock and leaves a child unsupervised: while a
// child is attached it gets them; otherwise idle is called.
type signals struct {
	ch   chan os.Signal
	idle func()
	done chan struct{}

	mu    sync.Mutex
	child *child
	last  syscall.Signal // the last one received; 0 if none
}

func catchSignals(idle func()) *signals {
	s := &signals{ch: make(chan os.Signal, 4), idle: idle, done: make(chan struct{})}
	signal.Notify(s.ch, forwarded...)
	go s.dispatch()
	return s
}

func (s *signals) dispatch() {
	for {
		select {
		case <-s.done:
			return
		case sig := <-s.ch:
			s.mu.Lock()
			s.last = sig.(syscall.Signal)
			c := s.child
			s.mu.Unlock()
			if c != nil {
				c.signal(sig.(syscall.Signal))
			} else {
				s.idle()
			}
		}
	}
}

func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.done)
}

// errInterrupted is signals.start's refusal: a signal came first.
var errInterrupted = errors.New("interrupted before the command was started")

// start starts argv as startChild does and attaches it, unless one of the
// forwarded signals came first: then it starts nothing and returns
// errInterrupted. s.mu is held through the start, so that a signal that
// comes meanwhile waits for it and then reaches the child. Started first
// and attached after (by supervise), a child missed a signal that came in
// between: idle took it, cancelling a wait that was over, and the command
// ran to its end as if none had come.
func (s *signals) start(argv, env []string) (*child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != 0 {
		return nil, errInterrupted
	}
	c, err := startChild(argv, env)
	if err == nil {
		s.child = c
	}
	return c, err
}

func (s *signals) attach(c *child) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.child = c
}

// received returns the last signal received, 0 if none.
func (s *signals) received() syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// interrupted is the exit for a signal that arrived while no command ran.
func (s *signals) interrupted(what string) error {
	sig := s.received()
	return fail(128+int(sig), "%s: interrupted by %v", what, sig)
}

// supervise waits for the child to exit, passing signals on to it, or for
// lost to close, when it stops the child; it reports whether it stopped it.
func supervise(c *child, sigs *signals, lost <-chan struct{}, killAfter time.Duration) bool {
	sigs.attach(c)
	defer sigs.attach(nil)
	select {
	case <-c.exited:
		return false
	case <-lost:
		c.stop(killAfter)
		return true
	}
}
