package s3test

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/internal/childproc"
)

// errExited means the server process exited before it became ready.
var errExited = errors.New("s3test: versitygw exited before it was ready")

// process is a running server process whose output is kept for error
// messages.
type process struct {
	*childproc.Proc
}

func startProcess(cmd *exec.Cmd) (*process, error) {
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	return &process{p}, nil
}

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
		return errors.New("s3test: versitygw did not exit within 10s of SIGKILL")
	}
}
