package harness

import (
	"context"
	"errors"

	"github.com/fencelock/fencelock/fence"
)

// Kinds of [Event].
const (
	EvLock   = "lock"   // a Lock call returned (OK says whether it got the lock)
	EvInvoke = "invoke" // a write is about to be attempted
	EvHold   = "hold"   // an armed worker passed its guard check and waits for "go"
	EvDone   = "done"   // a write returned
	EvRead   = "read"   // a read of a resource's current value returned (Call is its start)
	// EvMetrics carries the worker's OpenTelemetry counts so far
	// (Metrics), after each section.
	EvMetrics = "metrics"
)

// Outcomes of a write, in [Event.Outcome].
const (
	OutOK      = "ok"      // the resource accepted the write
	OutStale   = "stale"   // the resource refused it: fence.ErrStale
	OutLost    = "lost"    // the guard refused it locally: fence.ErrLockLost
	OutUnknown = "unknown" // no answer: fence.ErrUnknownOutcome
	OutError   = "error"   // any other failure; it may or may not have landed
)

// Resource kinds a worker writes for every key.
const (
	ResRow = "row" // a PostgreSQL row: postgres.Table.Upsert
	ResTx  = "tx"  // a PostgreSQL transaction: postgres.RunInTx
	ResS3  = "s3"  // an S3 object: s3fence.Store.Put
)

// resourceKinds lists the kinds in the order a worker writes them.
var resourceKinds = []string{ResRow, ResTx, ResS3}

// Event is one JSON line of a worker's log. Times are Unix nanoseconds of
// the wall clock, which all processes of a run share.
type Event struct {
	Ev      string `json:"ev"`
	Worker  string `json:"w"`
	Key     string `json:"key,omitempty"`
	Res     string `json:"res,omitempty"`
	Token   int64  `json:"tok,omitempty"`
	Seq     int64  `json:"seq,omitempty"`
	Value   string `json:"val,omitempty"`
	Time    int64  `json:"t"`
	Call    int64  `json:"call,omitempty"`
	OK      bool   `json:"ok,omitempty"`
	WaitNs  int64  `json:"wait,omitempty"`
	Outcome string `json:"out,omitempty"`
	Err     string `json:"err,omitempty"`
	// Metrics are an [EvMetrics] event's counts, keyed as [Report.Metrics].
	Metrics map[string]int64 `json:"m,omitempty"`
}

// outcome classifies a write's error.
func outcome(err error) string {
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
