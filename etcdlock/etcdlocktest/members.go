package etcdlocktest

import (
	"context"
	"fmt"
)

// StopMember crashes member i (SIGKILL to its process) and waits until it
// has exited; its data survives for [Server.RestartMember]. Stopping a
// stopped member does nothing. It panics unless the Server was started
// [WithMembers] and 0 <= i < n.
//
// What a lock holder sees depends on what is left:
//
//   - A majority still runs: the cluster keeps serving (after electing a new
//     leader, within about a second, if i led). A client connected to member
//     i moves to another one; etcd renews every lease when a new leader takes
//     over, so a held lock normally survives.
//   - No majority runs: no keepalive is acknowledged, and Done closes by the
//     lock's validity deadline with an error matching [etcdlock.ErrLost]
//     (usually [etcdlock.ErrValidityExpired]). Client.Close cannot revoke
//     the lease either, and takes the client's whole cleanup timeout (5 s by
//     default) to give up: restart a member before the test's cleanups run,
//     or give the test's client a short [etcdlock.WithCleanupTimeout].
func (s *Server) StopMember(i int) {
	s.members("StopMember", i)
	s.cluster.Stop(i)
}

// RestartMember starts member i again, on its data, and waits until it
// serves or ctx ends. Restarting a running member does nothing. It fails if
// another process took the member's ports meanwhile, or if the rest of the
// cluster has no quorum to let it rejoin before ctx ends. It panics as
// [Server.StopMember] does.
func (s *Server) RestartMember(ctx context.Context, i int) error {
	s.members("RestartMember", i)
	if err := s.cluster.Restart(ctx, i); err != nil {
		return fmt.Errorf("etcdlocktest: %w", err)
	}
	return nil
}

// Leader returns the index of the member that leads, or -1 when none says
// so before ctx ends. It panics unless the Server was started [WithMembers].
func (s *Server) Leader(ctx context.Context) int {
	s.members("Leader", 0)
	return s.cluster.Leader(ctx)
}

// members panics unless the Server has member processes and i is one.
func (s *Server) members(verb string, i int) {
	if s.cluster == nil {
		panic("etcdlocktest: " + verb + " needs a Server started WithMembers")
	}
	if i < 0 || i >= len(s.cluster.Members) {
		panic(fmt.Sprintf("etcdlocktest: %s(%d): the server has %d members", verb, i, len(s.cluster.Members)))
	}
}
