// Package harness is a Jepsen-style fault harness for fencelock: worker
// processes take etcdlock locks and write, with their fencing tokens, to a
// PostgreSQL row, a fenced PostgreSQL transaction, an S3 object, a key of
// the run's own etcd cluster (through the worker's own etcd client, so its
// request faults and partitions hit these writes too) and a row of a SQLite
// database file all workers share, while a nemesis pauses, kills and
// partitions them and restarts etcd members. A
// checker then reads the storage's own record of what it accepted and looks
// for stale writes that landed.
//
// One run ([Run]) goes like this:
//
//   - a 3-member etcd cluster starts, each member its own process
//     ([embedetcd.Cluster]), and each worker slot gets its own TCP proxy to
//     every member ([netproxy]);
//   - workers (this executable again, see [MaybeRunWorker]) loop: lock a key,
//     write each of its resources through a fence.Guard, unlock; they
//     report every attempt to the harness as an event ([check.Event]) in
//     childproc's worker protocol;
//   - the nemesis, driven by a seeded random source, injects faults of every
//     kind (pauses, kills, etcd member crashes, partitions, request faults,
//     etcd member replacements) until the run has reached its minimums of faults and writes
//     ([Config.Until]), or its cap ([Config.MaxDuration]);
//   - the checker (package check, a pure function of the history) compares
//     the workers' attempts with the storage's history: PostgreSQL's
//     append-only log written in the same transaction as each write, the
//     object versions of a versioned S3 bucket, every revision of each etcd
//     key (etcd's MVCC store; the harness's cluster is never compacted, and
//     a compacted history fails the read), and SQLite's log, written by
//     triggers in the same statement as each write.
//
// The register's resources also include a Redis hash (checked against the
// run's redis-server's append-only file) and, in runs whose
// [Config.ResKinds] have them (long runs: [Long]), an entry of a NATS
// JetStream key-value bucket (checked against the bucket's stream) and an
// Azure block blob on Azurite (checked against a log of what Azurite
// stored, kept by a proxy in the runner: Azurite keeps no blob versions).
//
// With Config.Kind [KindBank] the workers run Jepsen's bank workload
// instead: the keys are accounts in PostgreSQL rows, a fence/etcd Store
// and a fence/s3 Store, each worker section moves money between two of
// them under LockAll, and the checker ([check.CheckBank]) wants every
// acknowledged transfer reflected exactly once and the money conserved.
// Its control reads with plain reads before its fenced writes, and must
// lose money on PostgreSQL.
//
// With Config.Kind [KindEffects] the workers prove fence/outbox instead:
// each section moves money between two accounts in one fenced PostgreSQL
// transaction that records, in it, an effect for an HTTP receiver
// (outbox.NewReceiver in the harness process) and one for a JetStream
// stream (a nats-server the run starts); dispatchers, partition owners of
// an etcdlock Group inside the worker processes, deliver them. The checker
// ([check.CheckEffects]) wants each transfer PostgreSQL committed applied
// exactly once on each receiver, and no effect of one it did not. Its
// control sends the effects straight from the transaction, and must apply
// the effect of a transfer that did not land.
//
// With Config.Fenced false the workers write without fencing (a plain
// UPDATE, an unfenced transaction, a plain PutObject, a plain etcd Put of
// the record the Store would write, a plain SQLite upsert): the control
// run, in which the checker must find stale writes landing on every kind
// of resource.
package harness
