package etcdfence

import (
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/internal/outboxcodec"
)

// The key spaces under an Outbox's prefix:
//
//	PREFIX e/KEY    a recorded effect (KEY its outbox.Effect.Key), created
//	                by the write that recorded it and deleted when it is
//	                delivered; its mod revision, the recording write's, and
//	                its position in that write's slice give its order
//	PREFIX r/KEY    empty: created by the same write and never deleted, so
//	                that recording the effect again, pending, parked or
//	                delivered, is refused (the recording write compares
//	                this key alone); outside e/, so Pending never reads it
//	PREFIX p/KEY    the marker of a parked effect: why, and how many
//	                attempts; the effect stays at e/KEY, in its place
//	PREFIX f/NAME   the floor of the dispatcher resource NAME: the highest
//	                token that has settled through it
const (
	effectSpace = "e/"
	parkedSpace = "p/"
	seenSpace   = "r/"
	settleSpace = "f/"
)

// EffectKey returns the etcd key of the effect of token and seq on
// resource.
func (o *Outbox) EffectKey(resource string, token fence.Token, seq int64) string {
	return o.prefix + effectSpace + outbox.Key(resource, token, seq)
}

// seenKey is the key that stays once the effect is delivered.
func (o *Outbox) seenKey(e outbox.Effect) string { return o.prefix + seenSpace + e.Key() }

func (o *Outbox) parkedKey(e outbox.Effect) string { return o.prefix + parkedSpace + e.Key() }

func (o *Outbox) floorKey(resource string) string { return o.prefix + settleSpace + resource }

// stored is an effect as read back, with what orders it.
type stored struct {
	e   outbox.Effect
	rev int64 // the mod revision of its key: the recording write's
	pos int   // its position in that write
}

// decodeEffect reads an effect's value (internal/outboxcodec), stored
// under key at rev.
func decodeEffect(key string, rev int64, v []byte) (stored, error) {
	e, pos, err := outboxcodec.Decode(v)
	if err != nil {
		return stored{}, fmt.Errorf("%w: effect %q: %w", ErrCorrupt, key, err)
	}
	return stored{e: e, rev: rev, pos: pos}, nil
}

// decodeMarker reads a parked effect's marker.
func decodeMarker(key string, v []byte) (string, int, error) {
	reason, n, err := outboxcodec.DecodeMarker(v)
	if err != nil {
		return "", 0, fmt.Errorf("%w: parked marker %q: %w", ErrCorrupt, key, err)
	}
	return reason, n, nil
}
