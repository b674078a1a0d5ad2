package check

// ResEffects is the effects workload's resource kind: a transfer between
// two accounts in one fenced PostgreSQL transaction (postgres.RunInTxAll)
// that records, in the same transaction, one effect per receiver
// (postgres.Outbox.Record), which the dispatchers deliver.
const ResEffects ResKind = "effects"

// EffectsKinds lists the effects workload's resource kinds.
var EffectsKinds = []ResKind{ResEffects}

// The effects workload's receivers, in [Applied.Receiver].
const (
	// ReceiverHTTP is an HTTP service behind outbox.NewReceiver, which
	// deduplicates on the Idempotency-Key in a fenced store.
	ReceiverHTTP = "http"
	// ReceiverJetStream is a JetStream stream, which deduplicates on
	// Nats-Msg-Id.
	ReceiverJetStream = "jetstream"
)

// Receivers lists the effects workload's receivers, in report order.
var Receivers = []string{ReceiverHTTP, ReceiverJetStream}

// Applied is one effect a receiver applied, after its deduplication: the
// HTTP service's handler ran for it, or the stream stored it.
type Applied struct {
	Receiver string `json:"rcv"`
	Key      string `json:"key"` // the effect's idempotency key
	Resource string `json:"res"` // the effect's resource: an account
	Token    int64  `json:"tok"`
	Transfer string `json:"xfer"` // the payload: the transfer's ID
	Time     int64  `json:"t"`    // when it was applied, Unix nanoseconds
}

// Effects is what the effects workload's stores hold at the check: the
// transfers PostgreSQL committed (the log written in each transfer's
// transaction: whether a transfer landed, whatever its worker saw) and
// what each receiver applied.
type Effects struct {
	Landed  map[string]bool // transfer IDs
	Applied []Applied
	// Final says the workers have stopped and the outbox was drained: a
	// landed transfer's effect must have been applied by now. A check
	// while the workers write (Final false) looks only for effects
	// applied twice, and for effects of transfers that returned without
	// an acknowledgement and that PostgreSQL does not hold.
	Final bool
}

// Kinds of effects [Violation].
const (
	// vioEffectUnlanded: a receiver applied the effect of a transfer that
	// PostgreSQL does not hold: refused, failed, or never committed.
	vioEffectUnlanded ViolationKind = "effect-unlanded"
	// vioEffectTwice: a receiver applied a transfer's effect twice.
	vioEffectTwice ViolationKind = "effect-twice"
	// vioEffectLost: a transfer PostgreSQL holds has no effect applied on
	// a receiver, after the outbox was drained.
	vioEffectLost ViolationKind = "effect-lost"
	// vioEffectAcked: a transfer acknowledged to its worker is not in
	// PostgreSQL.
	vioEffectAcked ViolationKind = "acked-missing"
)

// Effects is the effects workload ([CheckEffects]): its control sends
// each effect straight from the critical section, and must apply the
// effect of a transfer that did not land, or apply one twice.
var EffectsWorkload = Workload{Kinds: EffectsKinds, MustCatch: EffectsKinds,
	catches:      []ViolationKind{vioEffectUnlanded, vioEffectTwice},
	catchesSoFar: []ViolationKind{vioEffectUnlanded, vioEffectTwice}}
