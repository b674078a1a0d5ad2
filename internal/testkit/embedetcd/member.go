package embedetcd

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// readyReport is what a member process reports ([childproc.Report]) once
// it serves.
const readyReport = "READY"

// Member is one etcd member of a [Cluster], running as its own process.
// Its name and URLs stay the same across restarts and across
// [Cluster.Replace], which puts a new member in its place; [Cluster.Move]
// gives the new member URLs of its own.
type Member struct {
	Name      string // m0, m1, ...
	ClientURL string // http://127.0.0.1:port
	PeerURL   string // http://127.0.0.1:port
	cfg       memberConfig

	mu   sync.Mutex
	proc *childproc.Proc // nil when stopped
}

// start starts the member's process with the given cluster state unless it
// runs, and waits until it serves clients. On failure nothing is left
// running.
func (m *Member) start(ctx context.Context, state string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runningLocked() {
		return nil
	}
	mc := m.cfg
	mc.State = state
	cmd, err := childproc.Reexec(MemberEnv, mc)
	if err != nil {
		return err
	}
	if testing.Testing() {
		// A test binary whose TestMain does not call MaybeRunMember then
		// runs no test and exits at once, so the start fails in a moment
		// instead of once every test of the package has run in the child.
		cmd.Args = append(cmd.Args, "-test.run=^$")
	}
	ready := make(chan struct{})
	var once sync.Once
	p, err := childproc.Start(cmd, func(line []byte) {
		if word, _ := childproc.ParseReport(line); word == readyReport {
			once.Do(func() { close(ready) })
		}
	})
	if err != nil {
		return fmt.Errorf("embedetcd: %s: %w", m.Name, err)
	}
	if err := awaitReady(ctx, p, ready); err != nil {
		p.Kill()
		return fmt.Errorf("embedetcd: %s: %w", m.Name, err)
	}
	m.proc = p
	return nil
}

func awaitReady(ctx context.Context, p *childproc.Proc, ready <-chan struct{}) error {
	select {
	case <-ready:
		return nil
	case <-p.Exited():
		return fmt.Errorf("member process exited before it was ready (does the executable's main or TestMain call MaybeRunMember?): %v: %s", p.Err(), p.Output())
	case <-ctx.Done():
		return fmt.Errorf("not ready: %w; output: %s", ctx.Err(), p.Output())
	}
}

// kill SIGKILLs the member's process, if any, and waits until it is reaped.
func (m *Member) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return
	}
	m.proc.Kill()
	m.proc = nil
}

func (m *Member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *Member) runningLocked() bool {
	if m.proc == nil {
		return false
	}
	select {
	case <-m.proc.Exited():
		return false
	default:
		return true
	}
}
