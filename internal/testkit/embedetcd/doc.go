// Package embedetcd runs etcd for tests, the demo and the fault harness:
// temp data dirs, random loopback ports, a quiet logger and short
// heartbeat/election settings so leases of one second are granted and
// leaders are elected in tens of milliseconds.
//
// It has two forms:
//
//   - [Cluster]: n members, each its own OS process (this executable
//     re-executed, see [MaybeRunMember]). [Cluster.Stop] is SIGKILL and
//     [Cluster.Restart] a new process on the same data dir, so a member
//     crash is a real crash and cannot take the caller down with it (an
//     embedded member stopped under in-flight reads can panic its whole
//     process: etcd-io/etcd#17223). [Cluster.Replace] changes membership:
//     a member removed, and a new one added as a learner and promoted.
//   - [Server]: one member inside this process, for callers that never stop
//     it (the etcdlock tests and benchmarks, the demo).
//
// An executable that starts a Cluster becomes a member process only by
// calling [MaybeRunMember] at the top of its main or TestMain; importing the
// package does nothing by itself (it has no init function), so the demo and
// any other importer that only runs a Server never turn into a member.
//
//	c := embedetcd.New(t, 3) // three member processes, closed when t ends
//	i := c.Leader(ctx)       // asked over the client API; -1 if none
//	c.Stop(i)                // SIGKILL
//	err := c.Restart(ctx, i) // a new process on its data dir
//	err = c.Replace(ctx, i)  // MemberRemove; a new member, learner then voter
package embedetcd
