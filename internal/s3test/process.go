package s3test

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// errExited means the server process exited before it became ready.
var errExited = errors.New("s3test: server process exited before it was ready")

// process is a running server process whose output is kept for error
// messages.
type process struct {
	cmd    *exec.Cmd
	out    *tailBuffer
	exited chan struct{} // closed once cmd.Wait has returned
	err    error         // cmd.Wait's result, set before exited closes
}

func startProcess(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, out: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("s3test: starting %s: %w", cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop kills the process and waits for it to exit.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("s3test: killing %s: %w", p.name(), err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("s3test: %s did not exit within 10s of SIGKILL", p.name())
	}
}

// name is the program's file name, for messages.
func (p *process) name() string { return filepath.Base(p.cmd.Path) }

func (p *process) output() string {
	return strings.TrimSpace(p.out.String())
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
