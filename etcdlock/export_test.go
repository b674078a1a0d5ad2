package etcdlock

import "context"

// UnconditionalReleaseForTest reverts fix 1 of the request-fault hardening
// for the property test's control run: cleanups and Unlock delete whatever
// key is in their slot, not only the one with their create revision.
var UnconditionalReleaseForTest = &unconditionalRelease

// LockOnEndedSessionForTest calls newLock as enqueue does when the session
// ends (its lease revoked) between enqueue's check of it and newLock.
func LockOnEndedSessionForTest(ctx context.Context, c *Client, name string, noWatch bool) (*Lock, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	t := c.ticket(s, spot{name: name, q: c.queue(name), wait: true, noWatch: noWatch, ended: ErrUnlocked})
	s.end(ErrLeaseExpired)
	return newLock(c, s, t, 1)
}
