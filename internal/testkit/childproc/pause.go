package childproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopTimeout bounds how long Pause waits for SIGSTOP to land.
const stopTimeout = 5 * time.Second

// Pause stops the process with SIGSTOP and returns once it is really
// stopped: every thread of it in state T (Linux's /proc/PID/task/*/stat;
// elsewhere ps's state of the process). A signal is delivered
// asynchronously, so without this wait the child could still run for a
// moment after Pause returned: a write meant to come after the freeze
// could land before it. It fails if the process has exited or is not
// stopped within 5 s.
func (p *Proc) Pause() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("childproc: pausing %s: %w", p.Name(), err)
	}
	deadline := time.Now().Add(stopTimeout)
	for {
		stopped, err := isStopped(p.Pid())
		switch {
		case stopped:
			return nil
		case err != nil:
			return fmt.Errorf("childproc: pausing %s: %w", p.Name(), err)
		case time.Now().After(deadline):
			return fmt.Errorf("childproc: %s (pid %d) not stopped %v after SIGSTOP", p.Name(), p.Pid(), stopTimeout)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("childproc: %s exited while being paused: %v", p.Name(), p.err)
		case <-time.After(time.Millisecond): // poll: the stop is reported by wait(2) with WUNTRACED, and exec.Cmd.Wait owns the wait
		}
	}
}

// Resume continues a paused process with SIGCONT; resuming a running one
// does nothing. An error means it has exited.
func (p *Proc) Resume() error {
	if err := p.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("childproc: resuming %s: %w", p.Name(), err)
	}
	return nil
}

// isStopped reports whether every thread of pid is stopped.
func isStopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(tasks) == 0 {
		if _, err := os.Stat("/proc/self/stat"); err == nil {
			return false, nil // /proc, but pid not (yet, or any more) listed
		}
		return psStopped(pid)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			return false, nil // a thread that exited meanwhile: look again
		}
		// The state follows the parenthesised command name: "pid (comm) T ...".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false, nil
		}
	}
	return true, nil
}

// psStopped asks ps for the state of pid, where there is no /proc (macOS,
// the BSDs); it stops a process as a whole.
func psStopped(pid int) (bool, error) {
	out, err := exec.Command("ps", "-o", "state=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return false, fmt.Errorf("ps: %w", err)
	}
	return strings.HasPrefix(strings.TrimSpace(string(out)), "T"), nil
}
