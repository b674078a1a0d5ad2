package main

import (
	"fmt"
	"time"

	"github.com/fencelock/fencelock/examples/internal/story"
	"github.com/fencelock/fencelock/internal/testkit/childproc"
)

// follower tells a round as its workers report it: it lets them go once
// all are connected, kills the victim once the others have gone past its
// job, and measures how soon another worker takes that job.
type follower struct {
	t      *story.Timeline
	q      queue
	procs  []*childproc.Proc
	r      *roundResult
	ready  int
	exited int
	killed time.Time
}

// follow handles events until every worker has exited.
func (f *follower) follow(events <-chan event) error {
	deadline := time.After(timeout)
	for f.exited < workers {
		select {
		case e := <-events:
			if err := f.handle(e); err != nil {
				return err
			}
		case <-deadline:
			return fmt.Errorf("jobqueue: workers not done after %v", timeout)
		}
	}
	return nil
}

// handle handles one event.
func (f *follower) handle(e event) error {
	r := f.r
	switch {
	case e.word == "EXIT":
		return f.exit(e.worker)
	case e.word == "READY":
		return f.connected()
	case e.word == "HELD":
		r.held = e.job
		f.t.Say("worker %d (pid %d) takes job %d and hangs in the middle of it%s", e.worker, f.procs[e.worker-1].Pid(), e.job, stopsHow(f.q))
	case e.word == "DONE" && r.held != 0 && f.killed.IsZero() && e.job > r.held:
		f.t.Say("the others go on past it: worker %d finished job %d while job %d stayed claimed", e.worker, e.job, r.held)
		f.killed = time.Now()
		f.procs[victimID-1].Kill()
		f.t.Say("worker %d SIGKILLed%s", victimID, killHow(f.q))
	case e.word == "TOOK" && !f.killed.IsZero() && e.job == r.held && r.takenBy == 0:
		r.takenBy, r.handoff = e.worker, e.at.Sub(f.killed)
		f.t.Say("worker %d takes job %d, %s after the kill%s", e.worker, e.job, story.Ms(r.handoff), takeHow(f.q))
	}
	return nil
}

// connected counts a connected worker and lets all go once all are.
func (f *follower) connected() error {
	if f.ready++; f.ready < workers {
		return nil
	}
	for _, p := range f.procs {
		if err := p.Send(childproc.Go); err != nil {
			return err
		}
	}
	f.t.Say("all %d workers connected; go", workers)
	return nil
}

// exit counts an exited worker; any but the killed victim must have
// exited cleanly.
func (f *follower) exit(id int) error {
	f.exited++
	p := f.procs[id-1]
	if err := p.Err(); err != nil && (id != victimID || !f.q.victim) {
		return fmt.Errorf("jobqueue: worker %d: %v: %s", id, err, p.Output())
	}
	return nil
}

func stopsHow(q queue) string {
	if q.name == "skiplocked" {
		return ": its transaction is open, the row locked"
	}
	return ": it holds the job's lock, its work outside the database"
}

func killHow(q queue) string {
	if q.name == "skiplocked" {
		return ": its connection drops, PostgreSQL aborts its transaction and the row lock goes with it"
	}
	return ": its lease is no longer renewed, but etcd keeps the lock until the lease runs out"
}

func takeHow(q queue) string {
	if q.name == "skiplocked" {
		return " (its next SELECT … SKIP LOCKED no longer skips it)"
	}
	return " (its TryLock is no longer refused)"
}
