package etcdfence

import (
	"encoding/binary"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// The key spaces under an Outbox's prefix:
//
//	PREFIX e/KEY    a recorded effect (KEY its outbox.Effect.Key), created
//	                by the write that recorded it and deleted when it is
//	                settled; its mod revision, the recording write's, and
//	                its position in that write's slice give its order
//	PREFIX p/KEY    the marker of a parked effect: why, and how many
//	                attempts; the effect stays at e/KEY, in its place
//	PREFIX f/NAME   the floor of the dispatcher resource NAME: the highest
//	                token that has settled through it
const (
	effectSpace = "e/"
	parkedSpace = "p/"
	settleSpace = "f/"
)

// effectCodec is the first byte of an effect's or a marker's value: the
// version of its encoding.
const effectCodec = 1

// maxReason is the most bytes of a parking reason kept.
const maxReason = 4096

// EffectKey returns the etcd key of the effect of token and seq on
// resource.
func (o *Outbox) EffectKey(resource string, token fence.Token, seq int64) string {
	return o.prefix + effectSpace + outbox.Key(resource, token, seq)
}

func (o *Outbox) parkedKey(e outbox.Effect) string { return o.prefix + parkedSpace + e.Key() }

func (o *Outbox) floorKey(resource string) string { return o.prefix + settleSpace + resource }

// encodeEffect returns e's value as stored: the codec, e's position in its
// write, its token and seq, its resource and destination, then its payload.
func encodeEffect(e outbox.Effect, pos int) string {
	b := make([]byte, 0, encodedSize(e))
	b = append(b, effectCodec)
	b = binary.AppendUvarint(b, uint64(pos))
	b = binary.AppendVarint(b, int64(e.Token))
	b = binary.AppendVarint(b, e.Seq)
	b = appendString(b, e.Resource)
	b = appendString(b, e.Destination)
	return string(append(b, e.Payload...))
}

// encodedSize bounds the size of encodeEffect's value.
func encodedSize(e outbox.Effect) int {
	return 1 + 4*binary.MaxVarintLen64 + len(e.Resource) + len(e.Destination) + len(e.Payload)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// stored is an effect as read back, with what orders it.
type stored struct {
	e   outbox.Effect
	rev int64 // the mod revision of its key: the recording write's
	pos int   // its position in that write
}

// decodeEffect reads an effect's value, stored under key at rev.
func decodeEffect(key string, rev int64, v []byte) (stored, error) {
	bad := func(what string) (stored, error) {
		return stored{}, fmt.Errorf("%w: effect %q: %s", ErrCorrupt, key, what)
	}
	if len(v) == 0 || v[0] != effectCodec {
		return bad("unknown encoding")
	}
	r := reader{b: v[1:]}
	pos, tok, seq := r.uvarint(), r.varint(), r.varint()
	res, dst := r.str(), r.str()
	if r.bad {
		return bad("truncated")
	}
	e := outbox.Effect{Resource: res, Token: fence.Token(tok), Seq: seq, Destination: dst, Payload: r.b}
	return stored{e: e, rev: rev, pos: int(pos)}, nil
}

// encodeMarker returns a parked effect's marker.
func encodeMarker(reason string, attempts int) string {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	b := binary.AppendUvarint([]byte{effectCodec}, uint64(max(attempts, 0)))
	return string(append(b, reason...))
}

// decodeMarker reads a parked effect's marker.
func decodeMarker(key string, v []byte) (reason string, attempts int, err error) {
	if len(v) == 0 || v[0] != effectCodec {
		return "", 0, fmt.Errorf("%w: parked marker %q: unknown encoding", ErrCorrupt, key)
	}
	r := reader{b: v[1:]}
	n := r.uvarint()
	if r.bad {
		return "", 0, fmt.Errorf("%w: parked marker %q: truncated", ErrCorrupt, key)
	}
	return string(r.b), int(n), nil
}

// reader reads the fields of a value, noting the first short one.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
