package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
)

// MaxDestinationLen is the longest [Effect.Destination] accepted, in bytes.
const MaxDestinationLen = 2048

// Effect is one side effect of a critical section (an email, a charge, a
// webhook call, a published event) recorded in the same fenced write as
// the state change it belongs to, so that it exists if and only if that
// write landed. A dispatcher ([Dispatcher]) delivers it afterwards, at
// least once, in order per resource, with [Effect.Key] as its idempotency
// key.
//
// Resource and Token are the fenced write's: the resource it claimed and
// the holder's token. Seq tells apart the effects one holder records on
// one resource; it must differ between them (the stores refuse a second
// effect with the same Resource, Token and Seq, with an error matching
// [ErrDuplicate]) and stay the same when the holder retries the write that
// records it, so that a retry after an unknown outcome cannot record the
// effect twice. A counter the holder keeps, starting at 0, is enough.
//
// Destination says where the [Sender] delivers it (a URL for
// [HTTPSender], a subject for the JetStream sender, any name for a
// [SenderFunc]). Payload is delivered as is.
type Effect struct {
	Resource    string
	Token       fence.Token
	Seq         int64
	Destination string
	Payload     []byte
}

// Key returns the effect's idempotency key, derived from its Resource,
// Token and Seq alone: the same on every delivery of the effect (retries,
// a second dispatcher after a takeover), and different for any other
// effect, of this holder or another. Receivers deduplicate on it. It has
// the form "fl1-TOKEN-SEQ-HASH", HASH 24 hex digits of the SHA-256 of the
// resource, and is at most 72 bytes long (an Idempotency-Key header or a
// Nats-Msg-Id takes it as is).
func (e Effect) Key() string {
	return Key(e.Resource, e.Token, e.Seq)
}

// Key returns the idempotency key of the effect Seq of Token on Resource:
// see [Effect.Key].
func Key(resource string, token fence.Token, seq int64) string {
	sum := sha256.Sum256([]byte(resource))
	return "fl1-" + strconv.FormatInt(int64(token), 10) + "-" + strconv.FormatInt(seq, 10) + "-" + hex.EncodeToString(sum[:12])
}

// Validate returns nil when e can be recorded: a non-empty valid UTF-8
// Resource of at most 512 bytes, a valid Token, Seq ≥ 0, and a non-empty
// Destination of at most [MaxDestinationLen] bytes. Otherwise an error
// matching [fence.ErrInvalidArgument] (and [fence.ErrInvalidKey] or
// [fence.ErrInvalidToken] where one applies) that names the field. Every
// store's recording call checks it before any I/O.
func (e Effect) Validate() error {
	switch {
	case e.Resource == "":
		return fmt.Errorf("outbox: effect: %w: empty resource", fence.ErrInvalidKey)
	case len(e.Resource) > 512 || !utf8.ValidString(e.Resource):
		return fmt.Errorf("outbox: effect: %w: resource is not valid UTF-8 of at most 512 bytes", fence.ErrInvalidKey)
	case !e.Token.Valid():
		return fmt.Errorf("outbox: effect on %q: %w (got %d)", e.Resource, fence.ErrInvalidToken, e.Token)
	case e.Seq < 0:
		return fmt.Errorf("%w: outbox: effect on %q: negative Seq %d", fence.ErrInvalidArgument, e.Resource, e.Seq)
	case e.Destination == "":
		return fmt.Errorf("%w (effect %s on %q)", ErrNoDestination, e.Key(), e.Resource)
	case len(e.Destination) > MaxDestinationLen || !utf8.ValidString(e.Destination):
		return fmt.Errorf("%w: outbox: effect %s: destination is not valid UTF-8 of at most %d bytes", fence.ErrInvalidArgument, e.Key(), MaxDestinationLen)
	}
	return nil
}

// ValidateAll checks each effect with [Effect.Validate], and that no two
// share a Resource, Token and Seq ([ErrDuplicate]), and that each one's
// Resource and Token are among claims when claims is not nil (an effect
// must belong to a resource its write claims, with the token it claims it
// with). Stores call it before any I/O.
func ValidateAll(effects []Effect, claims []fence.Claim) error {
	seen := make(map[string]bool, len(effects))
	for _, e := range effects {
		if err := e.Validate(); err != nil {
			return err
		}
		k := e.Key()
		if seen[k] {
			return fmt.Errorf("%w: %s (resource %q, token %d, seq %d) twice in one write", ErrDuplicate, k, e.Resource, e.Token, e.Seq)
		}
		seen[k] = true
		if claims != nil && !claimed(claims, e) {
			return fmt.Errorf("%w: outbox: effect %s: resource %q with token %d is not claimed by its write", fence.ErrInvalidArgument, k, e.Resource, e.Token)
		}
	}
	return nil
}

func claimed(claims []fence.Claim, e Effect) bool {
	for _, c := range claims {
		if c.Resource == e.Resource && c.Token == e.Token {
			return true
		}
	}
	return false
}

// Scope is the share of an outbox one dispatcher delivers: the effects
// whose resource falls in partition Index of Partitions ([PartitionOf]).
// The zero Scope, like Partitions 1, is the whole outbox. A dispatcher per
// partition of an etcdlock.Group spreads delivery over a fleet; every
// dispatcher of one outbox must use the same Partitions.
type Scope struct {
	Index      int
	Partitions int
}

// All is the scope of the whole outbox.
var All = Scope{Index: 0, Partitions: 1}

// Validate returns an error matching [fence.ErrInvalidArgument] unless
// 0 ≤ Index < Partitions, or s is the zero Scope.
func (s Scope) Validate() error {
	if s == (Scope{}) {
		return nil
	}
	if s.Partitions < 1 || s.Index < 0 || s.Index >= s.Partitions {
		return fmt.Errorf("%w: outbox: scope %d of %d (want 0 <= index < partitions)", fence.ErrInvalidArgument, s.Index, s.Partitions)
	}
	return nil
}

// norm returns s with the zero Scope made explicit.
func (s Scope) norm() Scope {
	if s.Partitions == 0 {
		return All
	}
	return s
}

// Has reports whether resource falls in s.
func (s Scope) Has(resource string) bool {
	s = s.norm()
	return PartitionOf(resource, s.Partitions) == s.Index
}

// String returns "INDEX/PARTITIONS".
func (s Scope) String() string {
	s = s.norm()
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Partitions)
}

// Hash returns the 32-bit FNV-1a hash of resource that [PartitionOf]
// reduces; stores keep it beside each effect so that a dispatcher's query
// selects its partition (hash mod partitions = index) without reading the
// others.
func Hash(resource string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(resource))
	return h.Sum32()
}

// PartitionOf returns the partition, in [0, partitions), that resource's
// effects fall in: [Hash] mod partitions. It returns 0 when partitions < 1.
func PartitionOf(resource string, partitions int) int {
	if partitions < 1 {
		return 0
	}
	return int(uint64(Hash(resource)) % uint64(partitions)) // as the SQL stores compute it, for any int
}
