// Package childproc starts the child processes of tests, the fault harness
// and the servers they use: this executable re-executed in another role
// (a harness worker, an etcd member, a paused holder) or a server binary.
//
// Every child gets a parent-death signal (SIGKILL, on Linux) so that none
// outlives a crashed parent, keeps the tail of its output for error
// messages, and is reaped by the package: [Proc.Exited] closes once it has
// exited and its output has been read.
//
//	cmd, err := childproc.Reexec("MY_ROLE", cfg) // this executable, cfg as JSON in MY_ROLE
//	p, err := childproc.Start(cmd, func(line []byte) { ... }) // each stdout line
//	...
//	p.Kill() // SIGKILL, and wait until reaped
package childproc
