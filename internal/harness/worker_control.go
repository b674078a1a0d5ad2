package harness

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/internal/reqfault"
)

// Commands the harness sends to a worker's stdin, one per line.
const (
	cmdArm      = "arm"      // hold before the next write, after the guard check
	cmdDisarm   = "disarm"   // never mind
	cmdGo       = "go"       // a held write may go on
	cmdReqFault = "reqfault" // + " " + a reqfault.Kind: give the next etcd request that fault
)

// control is a worker's end of the harness's commands. Closing stdin (EOF)
// asks the worker to finish its current lock and exit.
type control struct {
	inj     *reqfault.Injector // the worker's etcd client's
	armed   atomic.Bool
	release chan struct{} // one "go"
	stop    chan struct{} // closed at EOF
}

func readControl(r io.Reader, inj *reqfault.Injector) *control {
	c := &control{inj: inj, release: make(chan struct{}, 1), stop: make(chan struct{})}
	go func() {
		defer close(c.stop)
		for sc := bufio.NewScanner(r); sc.Scan(); {
			c.handle(sc.Text())
		}
	}()
	return c
}

func (c *control) handle(line string) {
	if kind, ok := strings.CutPrefix(line, cmdReqFault+" "); ok {
		if k, err := reqfault.ParseKind(kind); err == nil {
			c.inj.Next(reqfault.Any, k)
		}
		return
	}
	switch line {
	case cmdArm:
		c.armed.Store(true)
	case cmdDisarm:
		c.armed.Store(false)
	case cmdGo:
		select {
		case c.release <- struct{}{}:
		default:
		}
	}
}

// hold, when armed, reports the hold and waits for "go" (or EOF). This is
// where the nemesis freezes or kills the worker: after its guard check,
// before its write.
func (c *control) hold(report func()) {
	if !c.armed.CompareAndSwap(true, false) {
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

// eventLog writes events as JSON lines; safe for concurrent use.
type eventLog struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (l *eventLog) emit(e Event) {
	if e.Time == 0 {
		e.Time = time.Now().UnixNano()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.enc.Encode(e)
}
