package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fencelock/fencelock/internal/app/harness/check"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// pause freezes a worker right after its guard check, keeps it stopped past
// its lease, and lets it go on: the GC pause. Its write then carries a
// token older than the next holder's. The write paused is one of a
// resource kind on which no stale write has yet been refused (fenced) or
// landed (control), while there is one: a pause makes a stale write only
// now and then (when another worker takes the key and writes that kind
// before the paused one goes on), and five kinds left to chance would take
// many more pauses before each had one.
func (n *nemesis) pause(ctx context.Context, rng *rand.Rand) bool {
	var kind check.ResKind
	if lacking := n.hist.lacking(n.cfg.Fenced); len(lacking) > 0 {
		kind = lacking[rng.IntN(len(lacking))]
	}
	s, p := n.heldWorker(ctx, rng, kind)
	if p == nil {
		return false
	}
	defer s.release()
	defer func() { _ = p.Resume() }()
	if err := p.Pause(); err != nil {
		n.cfg.logf("nemesis: %v", err)
		_ = p.Send(childproc.Go)
		return false
	}
	start := time.Now()
	_ = p.Send(childproc.Go) // read once it runs again
	d, detail := n.pauseFor(rng)
	sleep(context.WithoutCancel(ctx), d)
	n.record(faultPause, s.id(), strings.TrimSpace(string(kind)+" "+detail), start)
	return true
}

// pauseFor returns how long a pause freezes its holder: the lease and 0.5
// to 1.2 s more, or, in a fenced run, one pause in Config.FreezeOneIn,
// Config.Freeze (the detail then says so). The safety control's pauses
// are never freezes: a lost update there needs the frozen holder's
// transaction to commit, and a newer holder blocked on it 100 ms ends it
// first (fence/postgres's preemption), so a freeze is a pause wasted.
func (n *nemesis) pauseFor(rng *rand.Rand) (time.Duration, string) {
	d := n.cfg.TTL + between(rng, 500*time.Millisecond, 1200*time.Millisecond)
	if n.cfg.Freeze > 0 && rng.IntN(n.cfg.FreezeOneIn) == 0 && n.cfg.Fenced {
		return n.cfg.Freeze, "(freeze)"
	}
	return d, ""
}

// kill kills a worker within a few milliseconds of letting it write, so
// that the kill lands before, during or just after the write, and starts a
// fresh worker in its place.
func (n *nemesis) kill(ctx context.Context, rng *rand.Rand) bool {
	s, p := n.heldWorker(ctx, rng, "")
	if p == nil {
		return false
	}
	defer s.release()
	_ = p.Send(childproc.Go)
	sleep(context.WithoutCancel(ctx), between(rng, 0, 4*time.Millisecond))
	id := s.id()
	p.Kill()
	n.record(faultKill, id, "", time.Now())
	return n.fleet.start(s) == nil
}

// restartMember crashes an etcd member, the leader half the time, with
// SIGKILL to its process, and starts a new process on its data dir.
func (n *nemesis) restartMember(ctx context.Context, rng *rand.Rand) bool {
	n.members.Lock()
	defer n.members.Unlock()
	i := n.etcd.Leader(ctx)
	if i < 0 || rng.IntN(2) == 0 {
		i = rng.IntN(len(n.etcd.Members))
	}
	start := time.Now()
	n.etcd.Stop(i)
	defer func() { n.record(faultMember, "", fmt.Sprintf("member %d", i), start) }()
	sleep(ctx, between(rng, 200*time.Millisecond, 800*time.Millisecond))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// A restart can fail if another process took the member's port meanwhile;
	// a member left down would turn the next stop into a loss of quorum.
	for {
		err := n.etcd.Restart(rctx, i)
		if err == nil {
			return true
		}
		n.cfg.logf("nemesis: restarting etcd member %d: %v", i, err)
		if rctx.Err() != nil {
			return false
		}
		sleep(rctx, 200*time.Millisecond)
	}
}

// replaceMember swaps an etcd member, the leader half the time, for a new
// one through the membership API ([embedetcd.Cluster.Replace]): removed,
// its data wiped, a new member added as a learner on its name and URLs and
// promoted once in sync. The workers' proxies to the member's URL then
// reach the new member.
func (n *nemesis) replaceMember(ctx context.Context, rng *rand.Rand) bool {
	n.members.Lock()
	defer n.members.Unlock()
	leader := n.etcd.Leader(ctx)
	i := leader
	if i < 0 || rng.IntN(2) == 0 {
		i = rng.IntN(len(n.etcd.Members))
	}
	role := "a follower"
	switch {
	case leader < 0:
		role = "no leader known"
	case i == leader:
		role = "the leader"
	}
	// Not cut short by the end of the run: a member left removed or a
	// learner would leave two voters, and the next crash without quorum.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	start := time.Now()
	for {
		err := n.etcd.Replace(rctx, i)
		if err == nil {
			n.cfg.logf("nemesis: replaced etcd member %d (%s) in %v", i, role, time.Since(start).Round(time.Millisecond))
			n.record(faultReplace, "", fmt.Sprintf("member %d (%s)", i, role), start)
			return true
		}
		n.cfg.logf("nemesis: replacing etcd member %d: %v", i, err)
		if rctx.Err() != nil {
			return false
		}
		sleep(rctx, 200*time.Millisecond)
	}
}

// partition cuts a worker off from every etcd member past its lease, then
// lets traffic through with a delay, then heals.
func (n *nemesis) partition(ctx context.Context, rng *rand.Rand) bool {
	s := n.fleet.claim(rng)
	if s == nil {
		return false
	}
	defer s.release()
	start := time.Now()
	for _, p := range s.proxies {
		p.Cut()
	}
	bg := context.WithoutCancel(ctx)
	sleep(bg, n.cfg.TTL+between(rng, 0, 800*time.Millisecond))
	d := between(rng, 20*time.Millisecond, 200*time.Millisecond)
	for _, p := range s.proxies {
		p.Heal()
		p.Delay(d)
	}
	sleep(bg, between(rng, 300*time.Millisecond, 1000*time.Millisecond))
	for _, p := range s.proxies {
		p.Heal()
	}
	n.record(faultPartition, s.id(), fmt.Sprintf("then %v delay", d), start)
	return true
}

// request makes a worker's next request to etcd (whichever it is: a lock's
// create, a waiter's read, a release, a lease grant) arrive after its caller
// gave up, lose its reply, or arrive twice.
func (n *nemesis) request(ctx context.Context, rng *rand.Rand) bool {
	s := n.fleet.claim(rng)
	if s == nil {
		return false
	}
	defer s.release()
	k := reqfault.Kinds[rng.IntN(len(reqfault.Kinds))]
	_ = s.current().Send(cmdReqFault + " " + k.String())
	n.record(faultRequest, s.id(), k.String(), time.Now())
	sleep(ctx, between(rng, 100*time.Millisecond, 400*time.Millisecond)) // one fault at a time per worker
	return true
}

// heldWorker claims a worker, arms it, and waits until it holds before a
// write of kind ("": any). It returns the claimed slot and its process, or
// nil (and releases the claim) when no worker got there in time.
func (n *nemesis) heldWorker(ctx context.Context, rng *rand.Rand, kind check.ResKind) (*slot, *childproc.Proc) {
	s := n.fleet.claim(rng)
	if s == nil {
		return nil, nil
	}
	p := s.current()
	if awaitHold(ctx, s, p, kind) {
		return s, p
	}
	s.release()
	return nil, nil
}

// awaitHold arms p and reports whether it held within holdTimeout. When it
// did not, p is disarmed, or released if its hold came in the meantime.
func awaitHold(ctx context.Context, s *slot, p *childproc.Proc, kind check.ResKind) bool {
	s.waiting.Store(true)
	_ = p.Send(strings.TrimSpace(cmdArm + " " + string(kind)))
	t := time.NewTimer(holdTimeout)
	defer t.Stop()
	select {
	case <-s.holds:
		return true
	case <-p.Exited():
	case <-t.C:
	case <-ctx.Done():
	}
	if s.waiting.CompareAndSwap(true, false) {
		_ = p.Send(cmdDisarm)
		return false
	}
	<-s.holds // delivered meanwhile
	_ = p.Send(childproc.Go)
	return false
}

// record adds a fault of kind on worker ("": on etcd) from start until
// now to the run's history, for the report's timeline.
func (n *nemesis) record(kind check.FaultKind, worker, detail string, start time.Time) {
	n.hist.add(check.Event{Ev: check.EvFault, Fault: kind, Worker: worker, Value: detail, Call: start.UnixNano(), Time: time.Now().UnixNano()})
}
