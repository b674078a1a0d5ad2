package etcdlock

import "context"

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
	t := c.ticket(s, spot{name: name, q: c.queue(name), wait: true, noWatch: noWatch, kind: kindLock})
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
