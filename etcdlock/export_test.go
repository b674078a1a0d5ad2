package etcdlock

import (
	"context"
	"strings"
)

// UnconditionalReleaseForTest reverts fix 1 of the request-fault hardening
// in the Client it is given to, for the property test's control run:
// cleanups and Unlock delete whatever key is in their slot, not only the
// one with their create revision.
func UnconditionalReleaseForTest() Option {
	return optionFunc(func(o *options) { o.ctl.unconditionalRelease = true })
}

// UnconditionalSlotReleaseForTest reverts the value compare of a
// semaphore's release, for its property test's control run: a release
// deletes every permit slot key its claims tried, whoever holds it now.
func UnconditionalSlotReleaseForTest() Option {
	return optionFunc(func(o *options) { o.ctl.unconditionalSlotRelease = true })
}

// UnconditionalGiveBackForTest reverts the compare of a semaphore's
// give-back (an optimistic claim that landed before the turn) with its
// claim's revision: the give-back deletes the slot's key whoever's it is
// now, for the control runs.
func UnconditionalGiveBackForTest() Option {
	return optionFunc(func(o *options) { o.ctl.unconditionalGiveBack = true })
}

// WithoutGiveBackRetryForTest reverts the retry of a semaphore's
// give-back whose request failed for a failure that passes (a lost
// reply, a leader change): the waiter gives up, for the control of
// TestSemaphoreGiveBackLostReplyKeepsPlace.
func WithoutGiveBackRetryForTest() Option {
	return optionFunc(func(o *options) { o.ctl.noGiveBackRetry = true })
}

// WithoutClaimRetryForTest reverts the read again after a semaphore's
// claim (after its turn) failed for a failure that passes (a lost reply, a
// leader change): the acquisition gives up, for the control of
// TestSemaphoreClaimLostReplyAcquires.
func WithoutClaimRetryForTest() Option {
	return optionFunc(func(o *options) { o.ctl.noClaimRetry = true })
}

// WritersIgnoreReadersForTest reverts the writer's wait for the readers
// queued before it, for the read/write property test's control run.
func WritersIgnoreReadersForTest() Option {
	return optionFunc(func(o *options) { o.ctl.writersIgnoreReaders = true })
}

// LockOnEndedSessionForTest calls newLock as enqueue does when the session
// ends (its lease revoked) between enqueue's check of it and newLock.
func LockOnEndedSessionForTest(ctx context.Context, c *Client, name string, noWatch bool) (*Lock, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	t := c.ticket(s, spot{name: name, q: c.keys().lockQueue(name), wait: true, noWatch: noWatch, kind: kindLock})
	s.end(ErrLeaseExpired)
	return newLock(c, s, t, 1)
}

// EndKeyWatchStreamForTest ends the Client's watch stream, as a member
// that goes away would; the watcher opens a new one.
func EndKeyWatchStreamForTest(c *Client) {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	if c.watches.cur != nil {
		c.watches.cur.cancel()
	}
}

// KeyWatchesForTest returns how many locks the Client's watcher watches,
// and whether every watch is in place on a stream (its creation sent and
// answered).
func KeyWatchesForTest(c *Client) (n int, settled bool) {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	for _, w := range c.watches.watches {
		if w.token != 0 {
			n++
		}
	}
	s := c.watches.cur
	return n, s != nil && len(s.queue) == 0 && len(s.sent) == 0
}

// KeyWatchBacklogForTest returns how many requests the current stream's
// writer has still to send and how many creations sent are unanswered
// (-1, -1 while there is no stream).
func KeyWatchBacklogForTest(c *Client) (queued, unanswered int) {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	if s := c.watches.cur; s != nil {
		return len(s.queue), len(s.sent)
	}
	return -1, -1
}

// JumpClockForTest moves the clock of validity deadlines (see instant) by
// d, as a resume after a suspend of d does; jump back by -d at the end.
func JumpClockForTest(d int64) { clockJump.Add(d) }

// ClockSourceForTest names the clock of validity deadlines and reads it
// (without any jump).
func ClockSourceForTest() (string, int64) { return clockSource(), readClock() }

// KeysForTest is the key layout under a Client's prefix (keys.go), for
// tests that read, write or delete etcd's keys themselves: they build the
// keys with the package's own code, so that a change of the layout is one
// change. (record_compat_test.go and the fuzz tests spell the layout out on
// purpose: they pin it.)
type KeysForTest struct{ p layout }

// KeysUnder is the layout under prefix, as WithPrefix normalises it.
func KeysUnder(prefix string) KeysForTest {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return KeysForTest{layout(prefix)}
}

// Locks is the prefix of every lock's keys, Lock(name) lock name's queue.
func (k KeysForTest) Locks() string           { return k.p.space(spaceLock) }
func (k KeysForTest) Lock(name string) string { return k.p.lockQueue(name) }

// Elections is the prefix of every election's keys, Election(name) election
// name's queue.
func (k KeysForTest) Elections() string           { return k.p.space(spaceElect) }
func (k KeysForTest) Election(name string) string { return k.p.electionQueue(name) }

// Semaphores is the prefix of every semaphore's keys, Semaphore(name) of
// semaphore name's (its queue's and its permits'), SemaphoreQueue(name) its
// queue, and Permit(name, k) its permit k's key.
func (k KeysForTest) Semaphores() string                { return k.p.space(spaceSem) }
func (k KeysForTest) Semaphore(name string) string      { return k.p.semaphore(name) }
func (k KeysForTest) SemaphoreQueue(name string) string { return k.p.semQueue(name) }
func (k KeysForTest) Permits(name string) string        { return k.p.semPermits(name) }
func (k KeysForTest) Permit(name string, n int) string  { return permitKey(k.p.semPermits(name), n) }

// GroupPartitions is the prefix of the queues of group name's partitions,
// each under its number and a slash.
func (k KeysForTest) GroupPartitions(name string) string { return k.p.groupPartitions(name) }

// Markers is the prefix of every session lane's marker.
func (k KeysForTest) Markers() string { return k.p.space(spaceLane) }

// AssignForTest computes a group's share (see assign).
func AssignForTest(names []string, n int) (owners []int, members []string) { return assign(names, n) }

// HandoffFirstForTest reverts the wait for the work before a partition is
// released, for the group property test's control: a partition taken
// away is released at once, its work still running.
func HandoffFirstForTest() JoinOption {
	return joinOptionFunc(func(o *joinOptions) { o.handoffFirst = true })
}
