package childproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// tailMax is how much of a child's output is kept for error messages.
const tailMax = 8 << 10

// Proc is a started child process. Its methods are safe for concurrent use.
type Proc struct {
	cmd    *exec.Cmd
	out    *tailBuffer
	exited chan struct{}
	err    error // cmd.Wait's result, set before exited closes
}

// Reexec returns a command that runs this executable again, without
// arguments, with the environment variable env set to cfg as JSON. The
// child's own init hook, reading env, turns it into what the caller wants
// before anything else in it runs (tests, flags, servers).
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
// buffer keeping the last 8 KiB ([Proc.Output]) and, when onLine is nil,
// its stdout too; otherwise onLine receives each stdout line, in order, from
// one goroutine, and must not keep the slice. Set up stdin, if any, before
// calling Start. A failure to start is returned; nothing is left running.
func Start(cmd *exec.Cmd, onLine func(line []byte)) (*Proc, error) {
	p := &Proc{cmd: cmd, out: &tailBuffer{max: tailMax}, exited: make(chan struct{})}
	cmd.Stderr = p.out
	var stdout io.Reader
	if onLine == nil {
		cmd.Stdout = p.out
	} else {
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return nil, fmt.Errorf("childproc: %w", err)
		}
		stdout = pipe
	}
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("childproc: starting %s: %w", cmd.Path, err)
	}
	go p.reap(stdout, onLine)
	return p, nil
}

// reap passes stdout's lines on until EOF, then waits for the process:
// exec.Cmd.Wait must not run before the reads from its pipe are done.
func (p *Proc) reap(stdout io.Reader, onLine func([]byte)) {
	defer close(p.exited)
	if stdout != nil {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			onLine(sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, stdout) // a line too long for the scanner
	}
	p.err = p.cmd.Wait()
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process; an error means it has exited.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits until the process is reaped: a crash, with
// no chance to clean up. Killing an exited process does nothing.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
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
