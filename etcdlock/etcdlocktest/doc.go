// Package etcdlocktest starts etcd for a test and makes a lock holder lose
// its lock on demand, so that tests can check what code under a lock does
// when the lock goes: stops its work, and has its late writes refused by the
// resource.
//
// [New] starts an etcd member inside the test process: data in
// t.TempDir(), loopback ports chosen by the kernel, no logging, and election
// settings short enough that etcd grants one-second leases. It is stopped
// when the test ends. [Server.Client] returns a *clientv3.Client whose
// traffic goes through a proxy of its own, so a fault can target one client:
//
//	func TestWorkerStopsWhenLockLost(t *testing.T) {
//		srv := etcdlocktest.New(t)
//		cli := srv.Client(t) // closed when t ends
//		locks, err := etcdlock.New(cli, etcdlock.WithTTL(time.Second))
//		...
//		srv.Partition(cli) // the holder's Done closes by its validity deadline
//	}
//
// The fault hooks, and what the holder sees:
//
//   - [Server.Partition] / [Server.Heal]: the client's traffic stalls;
//     Done closes by the lock's validity deadline ([etcdlock.ErrValidityExpired]).
//     A client of [Server.Client] is healed as its test ends, before the
//     cleanups run, so a cleanup's Close does not wait on it.
//   - [Server.ExpireLease]: the lease is revoked; Done closes within about
//     150 ms ([etcdlock.ErrLeaseExpired]).
//   - [Server.DeleteKey]: an operator deletes the lock's key; Done closes
//     within about 150 ms ([etcdlock.ErrKeyDeleted]).
//   - [Server.StopMember] / [Server.RestartMember], for a cluster started
//     [WithMembers]: a member crashes, or comes back.
//
// # Member processes
//
// [WithMembers] runs each member as its own process, so that a crash is a
// real one: the test binary re-executes itself with an environment variable
// (FENCELOCK_ETCD_MEMBER) set, and [MaybeRunMember], called first in the test
// binary's TestMain, turns that process into the member. Importing this
// package does nothing by itself: a test binary that uses WithMembers needs
// the TestMain hook, and one that does not needs nothing. The test binary
// must not set that variable itself.
//
// Programs that import only etcdlock do not link the etcd server; this
// package does, so import it from tests only.
package etcdlocktest
