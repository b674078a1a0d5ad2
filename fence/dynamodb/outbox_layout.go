package dynamofence

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// The items of an Outbox's table (CreateOutboxTable), PREFIX its
// WithOutboxPrefix:
//
//	pk PREFIX e#SHARD  sk KEY   a recorded effect (KEY its outbox.Effect.Key,
//	                            SHARD outbox.Hash(resource) mod the shards),
//	                            put by the write that recorded it on the
//	                            condition that it is new, deleted when it is
//	                            settled delivered; ord, its place in the
//	                            recording order; st "p" (pending) or "x"
//	                            (parked, with mark: why, and how many
//	                            attempts); eff, the effect (internal/outboxcodec)
//	pk PREFIX f#NAME   sk "-"   the floor of the dispatcher resource NAME:
//	                            the highest token that has settled through it
//
// Recording order without a global counter. A counter item every
// recording write increments would serialise every write of the outbox
// (each transaction on it conflicts with the others in flight), so there
// is none. Instead each write takes a position: the clock in microseconds,
// or one more than the last position of any record it claims (kept on the
// Store's item, fence_outbox_pos, set by the same transaction), whichever
// is higher. A record's writes are serialised by its version, so per
// resource the positions strictly rise whatever the writers' clocks do:
// the order a dispatcher must keep. Between resources the order is the
// writers' clocks', as close as they agree; nothing depends on it.
//
// ord is POSITION (19 digits) . INDEX in the write (3 digits) . KEY: unique,
// so that the local secondary index "ord" lists a shard in recording
// order. The item's key is KEY, so that recording an effect twice is
// refused by its condition (outbox.ErrDuplicate). A state attribute rather
// than removing an attribute: not every compatible server applies REMOVE
// (minidyn 0.8.2 does not).
const (
	obPK    = "pk"
	obSK    = "sk"
	obOrd   = "ord"
	obState = "st"
	obEff   = "eff"
	obMark  = "mark"
	obFloor = attrFloor
	obIndex = "ord"

	statePending = "p"
	stateParked  = "x"
	floorSK      = "-"

	maxShards = 1024
)

// MaxOutboxPrefix is the longest [WithOutboxPrefix], in bytes.
const MaxOutboxPrefix = 256

// effectOverhead is the most an effect's item holds besides its payload:
// its attributes' names, its keys and ord (the prefix and KEY at their
// longest), its state, the codec's framing of the longest resource and
// destination, and the longest parking marker.
const effectOverhead = len(obPK) + MaxOutboxPrefix + 2 + 4 + len(obSK) + keyLen + len(obOrd) + 19 + 1 + 3 + 1 + keyLen +
	len(obState) + 1 + len(obEff) + 1 + 4*binary.MaxVarintLen64 + 512 + outbox.MaxDestinationLen +
	len(obMark) + 1 + binary.MaxVarintLen64 + outboxcodec.MaxReason

// keyLen is the longest outbox.Effect.Key.
const keyLen = 72

// MaxEffectPayload is the largest payload of an effect an [Outbox]
// records: what an item of DynamoDB's [MaxItemSize] holds beside the
// longest resource, destination, prefix and parking reason (a little
// under 400 KB). A larger one is refused with [outbox.ErrTooLarge].
const MaxEffectPayload = MaxItemSize - effectOverhead

// maxTxBytes is DynamoDB's limit on a transaction's items, 4 MB.
const maxTxBytes = 4 << 20

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func (o *Outbox) shardKey(resource string) string {
	return o.prefix + "e#" + strconv.Itoa(int(outbox.Hash(resource)%uint32(o.shards)))
}

func (o *Outbox) effectKey(e outbox.Effect) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{obPK: str(o.shardKey(e.Resource)), obSK: str(e.Key())}
}

func (o *Outbox) floorKey(resource string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{obPK: str(o.prefix + "f#" + resource), obSK: str(floorSK)}
}

// effectItem is effect i of a write at pos, pending.
func (o *Outbox) effectItem(e outbox.Effect, pos int64, i int) map[string]types.AttributeValue {
	item := o.effectKey(e)
	item[obOrd] = str(fmt.Sprintf("%019d.%03d.%s", pos, i, e.Key()))
	item[obState] = str(statePending)
	item[obEff] = &types.AttributeValueMemberB{Value: []byte(outboxcodec.Encode(e, i))}
	return item
}

// position is the position of a write that claimed records whose last
// positions are last: the clock, or one more than the highest of them.
func position(last ...int64) int64 {
	pos := time.Now().UnixMicro()
	for _, l := range last {
		pos = max(pos, l+1)
	}
	return pos
}

// decodeEffectItem reads an effect's item.
func decodeEffectItem(item map[string]types.AttributeValue) (outbox.Effect, error) {
	b, ok := item[obEff].(*types.AttributeValueMemberB)
	if !ok {
		return outbox.Effect{}, fmt.Errorf("%w: outbox item %v: no binary %s", ErrCorrupt, item[obSK], obEff)
	}
	e, _, err := outboxcodec.Decode(b.Value)
	if err != nil {
		return outbox.Effect{}, fmt.Errorf("%w: outbox item %v: %w", ErrCorrupt, item[obSK], err)
	}
	return e, nil
}

// decodeMark reads a parked effect's marker.
func decodeMark(item map[string]types.AttributeValue) (string, int, error) {
	b, ok := item[obMark].(*types.AttributeValueMemberB)
	if !ok {
		return "", 0, fmt.Errorf("%w: parked outbox item %v: no binary %s", ErrCorrupt, item[obSK], obMark)
	}
	reason, n, err := outboxcodec.DecodeMarker(b.Value)
	if err != nil {
		return "", 0, fmt.Errorf("%w: parked outbox item %v: %w", ErrCorrupt, item[obSK], err)
	}
	return reason, n, nil
}
