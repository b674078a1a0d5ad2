package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/internal/childproc"
)

// proc is a running worker process seen from the harness.
type proc struct {
	id     string
	child  *childproc.Proc
	exited <-chan struct{} // closed once its output is read and it has been waited for

	mu    sync.Mutex // serialises writes to stdin
	stdin io.WriteCloser
}

// startProc re-executes this executable as a worker with cfg, passing every
// event it logs to onEvent (from one goroutine, in order).
func startProc(cfg workerConfig, onEvent func(*proc, Event)) (*proc, error) {
	cmd, err := childproc.Reexec(WorkerEnv, cfg)
	if err != nil {
		return nil, err
	}
	p := &proc{id: cfg.ID}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	p.child, err = childproc.Start(cmd, func(line []byte) {
		var e Event
		if json.Unmarshal(line, &e) == nil {
			onEvent(p, e)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("harness: starting worker %s: %w", cfg.ID, err)
	}
	p.exited = p.child.Exited()
	return p, nil
}

// send writes one command line to the worker; errors mean it is gone.
func (p *proc) send(cmd string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.stdin, cmd+"\n")
}

func (p *proc) signal(sig syscall.Signal) { _ = p.child.Signal(sig) }

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() { p.child.Kill() }

// stop asks the worker to finish (EOF on stdin) and kills it if it has not
// exited within timeout.
func (p *proc) stop(timeout time.Duration) {
	p.mu.Lock()
	_ = p.stdin.Close()
	p.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.signal(syscall.SIGCONT)
		p.kill()
	}
}
