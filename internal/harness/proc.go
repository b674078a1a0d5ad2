package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a running worker process seen from the harness.
type proc struct {
	id     string
	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{} // closed once its output is read and it has been waited for

	mu    sync.Mutex // serialises writes to stdin
	stdin io.WriteCloser
}

// startProc re-executes this executable as a worker with cfg, passing every
// event it logs to onEvent (from one goroutine, in order).
func startProc(cfg workerConfig, onEvent func(*proc, Event)) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p := &proc{id: cfg.ID, cmd: exec.Command(exe), stderr: &tailBuffer{max: 4 << 10}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
	p.cmd.Stderr = p.stderr
	setParentDeathSignal(p.cmd)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("harness: starting worker %s: %w", cfg.ID, err)
	}
	go p.read(stdout, onEvent)
	return p, nil
}

// read passes stdout's events on until EOF, then reaps the process.
func (p *proc) read(stdout io.Reader, onEvent func(*proc, Event)) {
	defer close(p.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err == nil {
			onEvent(p, e)
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	_ = p.cmd.Wait()
}

// send writes one command line to the worker; errors mean it is gone.
func (p *proc) send(cmd string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.stdin, cmd+"\n")
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

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

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
