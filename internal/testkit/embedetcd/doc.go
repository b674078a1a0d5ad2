// Package embedetcd runs etcd for tests, the demo and the fault harness:
// temp data dirs, random loopback ports, a quiet logger and short
// heartbeat/election settings so leases of one second are granted and
// leaders are elected in tens of milliseconds.
//
// It has two forms:
//
//   - [Cluster]: n members, each its own OS process (this executable
//     re-executed, see [MemberEnv]). [Cluster.Stop] is SIGKILL and
//     [Cluster.Restart] a new process on the same data dir, so a member
//     crash is a real crash and cannot take the caller down with it (an
//     embedded member stopped under in-flight reads can panic its whole
//     process: etcd-io/etcd#17223).
//   - [Server]: one member inside this process, for callers that never stop
//     it (the etcdlock tests and benchmarks, the demo).
//
// Any binary that imports this package can be a member process: the
// package's init function turns the process into one when [MemberEnv] is
// set, before the importer's own init functions, TestMain or main run.
//
//	c := embedetcd.New(t, 3) // three member processes, closed when t ends
//	i := c.Leader(ctx)       // asked over the client API; -1 if none
//	c.Stop(i)                // SIGKILL
//	err := c.Restart(ctx, i) // a new process on its data dir
package embedetcd
