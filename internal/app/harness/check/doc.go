// Package check is the fault harness's checker: a pure function of a run's
// history. From the workers' events ([Event], paired into [Attempt]s by
// [Attempts]) and the storage's own record of what it accepted ([Storage])
// it finds the safety violations ([Check]: token order, lost, refused yet
// landed and phantom writes, and linearizability of a fenced register),
// tallies a [Report], and says whether a fenced run and its control prove
// anything ([Verdict]). For the bank workload ([Bank]), [CheckBank]
// checks the transfers against each store's [Ledger] instead: every
// acknowledged transfer reflected exactly once, and the money conserved.
// Next to safety it measures liveness ([Stalls]): after each pause or
// kill of a holder, how long the next holder of each of its keys waited
// from its lock to its first accepted writes, a stall violation when past
// the old lease + 1 s and an allowance for faults that may hold the next
// holder up itself ([CheckLiveness]).
// It does no I/O but writing what it is given to; the harness runs the
// processes and reads the storage. It imports no other
// part of the harness, no lock client and no adapter (only the fence
// vocabulary and internal/tel's names), so it can be read and tested on
// its own; internal/testkit's layering test holds it to that.
package check
