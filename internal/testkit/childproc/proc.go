package childproc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// tailMax is how much of a child's output is kept for error messages.
const tailMax = 8 << 10

// Proc is a started child process. Its methods are safe for concurrent use.
type Proc struct {
	cmd    *exec.Cmd
	out    *tailBuffer
	lines  *lineQueue // stdout lines for Next; nil with a line handler
	exited chan struct{}
	err    error // cmd.Wait's result, set before exited closes
	killed atomic.Bool

	mu    sync.Mutex // serialises writes to stdin
	stdin io.WriteCloser
}

// Reexec returns a command that runs this executable again, without
// arguments, with the environment variable env set to cfg as JSON. The
// child's main or TestMain (or an init function of its own package) reads
// env first and turns it into what the caller wants before anything else
// in it runs (tests, flags, servers): embedetcd.MaybeRunMember and
// harness.MaybeRunWorker are such hooks.
func Reexec(env string, cfg any) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("childproc: %w", err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("childproc: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"="+string(js))
	return cmd, nil
}

// Start starts cmd, which it owns from then on. It sets cmd's stderr to a
// buffer keeping the last 8 KiB ([Proc.Output]) and, unless cmd.Stdin is
// set, its stdin to a pipe for [Proc.Send]. When onLine is nil, stdout goes
// to that buffer too and its lines are queued for [Proc.Next]; otherwise
// onLine receives each stdout line, in order, from one goroutine, and must
// not keep the slice. A failure to start is returned; nothing is left
// running.
func Start(cmd *exec.Cmd, onLine func(line []byte)) (*Proc, error) {
	p := &Proc{cmd: cmd, out: &tailBuffer{max: tailMax}, exited: make(chan struct{})}
	cmd.Stderr = p.out
	if cmd.Stdin == nil {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("childproc: %w", err)
		}
		p.stdin = stdin
	}
	if onLine == nil {
		p.lines = newLineQueue()
		onLine = p.queue
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("childproc: %w", err)
	}
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("childproc: starting %s: %w", cmd.Path, err)
	}
	go p.reap(stdout, onLine)
	return p, nil
}

// queue is the line handler of a Proc started without one.
func (p *Proc) queue(line []byte) {
	_, _ = p.out.Write(append(append([]byte(nil), line...), '\n'))
	p.lines.push(string(line))
}

// reap passes stdout's lines on until EOF, then waits for the process:
// exec.Cmd.Wait must not run before the reads from its pipe are done.
func (p *Proc) reap(stdout io.Reader, onLine func([]byte)) {
	defer close(p.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		onLine(sc.Bytes())
	}
	_, _ = io.Copy(io.Discard, stdout) // a line too long for the scanner
	p.err = p.cmd.Wait()
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Name returns the program's file name, for messages.
func (p *Proc) Name() string { return filepath.Base(p.cmd.Path) }

// Signal sends sig to the process; an error means it has exited.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Send writes line to the process's stdin (see the package's worker
// protocol). An error means the process has exited or its stdin is closed.
func (p *Proc) Send(line string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil {
		return errors.New("childproc: Send: stdin is not a pipe of this package's")
	}
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return fmt.Errorf("childproc: writing to %s: %w", p.Name(), err)
	}
	return nil
}

// closeStdin sends EOF, if stdin is this package's pipe.
func (p *Proc) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
}

// Kill sends SIGKILL and waits until the process is reaped: a crash, with
// no chance to clean up. Killing an exited process does nothing. [Proc.Stop]
// does not count an exit caused by Kill as a failure.
func (p *Proc) Kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// ErrRunning means the process had not exited within the time given.
var ErrRunning = errors.New("childproc: still running")

// Wait waits up to timeout for the process to exit and returns how it ended
// ([Proc.Err]), or an error matching [ErrRunning].
func (p *Proc) Wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.err
	case <-t.C:
		return fmt.Errorf("%w: %s (pid %d) after %v", ErrRunning, p.Name(), p.Pid(), timeout)
	}
}

// Stop resumes the process if it is paused, closes its stdin (EOF: finish
// and exit, in the worker protocol) and waits up to timeout for it to exit.
// It returns nil when it exited with status 0 or [Proc.Kill] ended it, how
// it ended otherwise, or, when it was still running, an error saying so,
// after killing it.
func (p *Proc) Stop(timeout time.Duration) error {
	_ = p.Resume()
	p.closeStdin()
	err := p.Wait(timeout)
	switch {
	case errors.Is(err, ErrRunning):
		p.Kill()
		return fmt.Errorf("%w; killed", err)
	case p.killed.Load():
		return nil
	default:
		return err
	}
}

// Exited is closed once the process has exited, its stdout has been read to
// the end and it has been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err returns how the process ended (exec.Cmd.Wait's result): nil for exit
// status 0. It is only meaningful once [Proc.Exited] is closed.
func (p *Proc) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Output returns the last 8 KiB of the process's stderr (and stdout, when
// Start had no line handler), trimmed.
func (p *Proc) Output() string { return strings.TrimSpace(p.out.String()) }
