// Package childproc starts the child processes of tests, the demo, the
// fault harness and the servers they use: this executable re-executed in
// another role (a worker, an etcd member, a paused holder) or a server
// binary.
//
// Every child gets a parent-death signal (SIGKILL, on Linux) so that none
// outlives a crashed parent, keeps the tail of its output for error
// messages, and is reaped by the package: [Proc.Exited] closes once it has
// exited and its output has been read.
//
// # Worker protocol
//
// A re-executed worker and its parent talk in lines, one way for every
// worker:
//
//   - parent to child, on the child's stdin: commands, a word and an
//     optional argument ([Proc.Send], read with [ReadCommands] or
//     [AwaitGo]). [Go] lets a worker that holds before a write go on. EOF
//     asks the worker to finish and exit with status 0 ([Proc.Stop]).
//   - child to parent, on the child's stdout: reports, an upper-case word
//     and a payload ([Report]), read with [Proc.Next] or by the line
//     handler given to [Start] ([ParseReport]).
//
// A holder that must be frozen between its guard check and its write
// reports (READY), waits for [Go], and is frozen meanwhile with
// [Proc.Pause], which returns only once every thread of the child has
// stopped, so that nothing the child does can come after the freeze:
//
//	cmd, err := childproc.Reexec("MY_ROLE", cfg) // this executable, cfg as JSON in MY_ROLE
//	p, err := childproc.Start(cmd, nil)          // stdout lines queued for Next
//	tok, err := p.Next(30*time.Second, "READY")
//	err = p.Pause()                              // SIGSTOP, and stopped
//	...                                          // the next holder's turn
//	err = p.Send(childproc.Go)                   // read once it runs again
//	err = p.Resume()                             // SIGCONT
//	res, err := p.Next(30*time.Second, "RESULT")
//	err = p.Stop(10 * time.Second)               // EOF, wait, kill if need be
package childproc
