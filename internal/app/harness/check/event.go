package check

import (
	"context"
	"errors"

	"github.com/fencelock/fencelock/fence"
)

// EvKind is the kind of an [Event].
type EvKind string

// Kinds of [Event].
const (
	EvLock   EvKind = "lock"   // a Lock call returned (OK says whether it got the lock)
	EvInvoke EvKind = "invoke" // a write is about to be attempted
	EvHold   EvKind = "hold"   // an armed worker passed its guard check and waits for "go"
	EvDone   EvKind = "done"   // a write returned
	EvRead   EvKind = "read"   // a read of a resource's current value returned (Call is its start)
	// EvUnlock ends the hold an EvLock of the same worker, key and token
	// began: the worker released the lock, resigned its term or gave up
	// its partition. A killed worker's hold has none.
	EvUnlock EvKind = "unlock"
	// EvFault is a fault the nemesis injected (Fault), from Call to Time,
	// on Worker ("" for one on an etcd member), with Value saying more.
	// The nemesis records it; the workers never do.
	EvFault EvKind = "fault"
	// EvMetrics carries the worker's OpenTelemetry counts so far
	// (Metrics), after each section.
	EvMetrics EvKind = "metrics"
)

// Outcome is how a write ended, as its worker saw it.
type Outcome string

// Outcomes of a write, in [Event.Outcome].
const (
	OutOK      Outcome = "ok"      // the resource accepted the write
	OutStale   Outcome = "stale"   // the resource refused it: fence.ErrStale
	OutLost    Outcome = "lost"    // the guard refused it locally: fence.ErrLockLost
	OutUnknown Outcome = "unknown" // no answer: fence.ErrUnknownOutcome
	OutError   Outcome = "error"   // any other failure; it may or may not have landed
)

// ResKind is a kind of resource a worker writes.
type ResKind string

// Resource kinds a worker writes for every key.
const (
	ResRow ResKind = "row" // a PostgreSQL row: postgres.Table.Upsert
	ResTx  ResKind = "tx"  // a PostgreSQL transaction: postgres.RunInTx
	ResS3  ResKind = "s3"  // an S3 object: s3fence.Store.Put
	// ResEtcd is an etcd key of the harness's own cluster:
	// etcdfence.Store.Put through the worker's etcd client.
	ResEtcd ResKind = "etcd"
	// ResSQL is a row of a SQLite database file shared by the workers:
	// sqlfence.Table.Upsert.
	ResSQL ResKind = "sql"
	// ResRedis is a hash of the run's redis-server: redisfence.Store.Put.
	ResRedis ResKind = "redis"
	// ResJetStream is an entry of the run's NATS JetStream key-value
	// bucket: jsfence.Store.Put.
	ResJetStream ResKind = "jetstream"
	// ResAzure is a block blob of the run's container on Azurite:
	// azblobfence.Store.Put.
	ResAzure ResKind = "azblob"
)

// ResKinds lists the register's resource kinds, in report order (the
// bank's are [BankKinds]). A run may write some of them only
// ([RegisterOf]).
var ResKinds = []ResKind{ResRow, ResTx, ResS3, ResEtcd, ResSQL, ResRedis, ResJetStream, ResAzure}

// Event is one JSON line of a worker's log. Times are Unix nanoseconds of
// the wall clock, which all processes of a run share.
type Event struct {
	Ev      EvKind  `json:"ev"`
	Worker  string  `json:"w"`
	Key     string  `json:"key,omitempty"`
	Res     ResKind `json:"res,omitempty"`
	Token   int64   `json:"tok,omitempty"`
	Seq     int64   `json:"seq,omitempty"`
	Value   string  `json:"val,omitempty"`
	Time    int64   `json:"t"`
	Call    int64   `json:"call,omitempty"`
	OK      bool    `json:"ok,omitempty"`
	WaitNs  int64   `json:"wait,omitempty"`
	Outcome Outcome `json:"out,omitempty"`
	Err     string  `json:"err,omitempty"`
	// Metrics are an [EvMetrics] event's counts, keyed as [Report.Metrics].
	Metrics map[string]int64 `json:"m,omitempty"`
	// Transfer is a bank transfer's, on its invoke and done events (Res
	// one of [BankKinds]); the done event's says which legs may have
	// landed.
	Transfer *Transfer `json:"xfer,omitempty"`
	// Fault is an [EvFault] event's kind of fault.
	Fault FaultKind `json:"fault,omitempty"`
}

// OutcomeOf classifies a write's error.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutOK
	case errors.Is(err, fence.ErrStale):
		return OutStale
	case errors.Is(err, fence.ErrLockLost):
		return OutLost
	case errors.Is(err, fence.ErrUnknownOutcome), errors.Is(err, context.DeadlineExceeded):
		return OutUnknown
	}
	return OutError
}
