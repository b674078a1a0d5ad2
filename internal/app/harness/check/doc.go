// Package check is the fault harness's checker: a pure function of a run's
// history. From the workers' events ([Event], paired into [Attempt]s by
// [Attempts]) and the storage's own record of what it accepted ([Storage])
// it finds the safety violations ([Check]: token order, lost, refused yet
// landed and phantom writes, and linearizability of a fenced register),
// tallies a [Report], and says whether a fenced run and its control prove
// anything ([Verdict]). It does no I/O but writing what it is given to; the
// harness runs the processes and reads the storage.
package check
