package s3test

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/internal/childproc"
)

// errExited means the server process exited before it became ready.
var errExited = errors.New("s3test: server process exited before it was ready")

// process is a running server process whose output is kept for error
// messages.
type process struct {
	*childproc.Proc
	path string
}

func startProcess(cmd *exec.Cmd) (*process, error) {
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	return &process{Proc: p, path: cmd.Path}, nil
}

// name is the program's file name, for messages.
func (p *process) name() string { return filepath.Base(p.path) }

// stop kills the process and waits for it to exit.
func (p *process) stop() error {
	select {
	case <-p.Exited():
		return nil
	default:
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.Exited():
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("s3test: %s did not exit within 10s of SIGKILL", p.name())
	}
}
