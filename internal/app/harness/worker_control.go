package harness

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// Commands the harness sends to a worker's stdin (childproc's worker
// protocol), besides childproc.Go: a held write may go on.
const (
	cmdArm      = "arm"      // [+ " " + a check.ResKind]: hold before the next write (of that kind), after the guard check
	cmdDisarm   = "disarm"   // never mind
	cmdReqFault = "reqfault" // + " " + a reqfault.Kind: give the next etcd request that fault
)

// control is a worker's end of the harness's commands. Closing stdin (EOF)
// asks the worker to finish its current lock and exit.
type control struct {
	inj     *reqfault.Injector // the worker's etcd client's
	mu      sync.Mutex
	armed   bool
	kind    check.ResKind // when armed: the kind of write to hold before; "" for any
	release chan struct{} // one "go"
	stop    chan struct{} // closed at EOF
}

func readControl(r io.Reader, inj *reqfault.Injector) *control {
	c := &control{inj: inj, release: make(chan struct{}, 1), stop: make(chan struct{})}
	go func() {
		defer close(c.stop)
		childproc.ReadCommands(r, c.handle)
	}()
	return c
}

func (c *control) handle(word, arg string) {
	switch word {
	case cmdReqFault:
		if k, err := reqfault.ParseKind(arg); err == nil {
			c.inj.Next(reqfault.Any, k)
		}
	case cmdArm:
		c.arm(true, check.ResKind(arg))
	case cmdDisarm:
		c.arm(false, "")
	case childproc.Go:
		select {
		case c.release <- struct{}{}:
		default:
		}
	}
}

func (c *control) arm(on bool, kind check.ResKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.kind = on, kind
}

// disarm disarms c if it is armed for a write of kind, and reports
// whether it was.
func (c *control) disarm(kind check.ResKind) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed || c.kind != "" && c.kind != kind {
		return false
	}
	c.armed = false
	return true
}

// hold, when armed for a write of kind, reports the hold and waits for
// "go" (or EOF). This is where the nemesis freezes or kills the worker:
// after its guard check, before its write.
func (c *control) hold(kind check.ResKind, report func()) {
	if !c.disarm(kind) {
		return
	}
	report()
	select {
	case <-c.release:
	case <-c.stop:
	}
}

func (c *control) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// pause waits for d or until the worker is asked to stop.
func (c *control) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.stop:
	}
}

// eventLog reports events to the harness, as JSON; safe for concurrent
// use.
type eventLog struct{ w io.Writer }

func (l *eventLog) emit(e check.Event) {
	if e.Time == 0 {
		e.Time = time.Now().UnixNano()
	}
	js, _ := json.Marshal(e) // an Event always marshals
	_ = childproc.Report(l.w, evReport, string(js))
}
