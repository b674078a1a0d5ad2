// Package outboxcodec is the one encoding of a recorded outbox effect and
// of a parked effect's marker that the key-value stores (fence/etcd,
// fence/redis, fence/dynamodb) keep as values: a version byte,
// varint-framed fields, then the payload as is; and the argument checks
// and settling rules their outbox Logs share (check.go).
package outboxcodec

import (
	"encoding/binary"
	"errors"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
)

// version is the first byte of every encoded value.
const version = 1

// MaxReason is the most bytes of a parking reason kept.
const MaxReason = 4096

// ErrMalformed is returned for a value this package did not encode; the
// stores wrap it in their own ErrCorrupt.
var ErrMalformed = errors.New("not an encoded outbox value")

// Encode returns e as stored, with pos, its place in the write that
// recorded it.
func Encode(e outbox.Effect, pos int) string {
	b := make([]byte, 0, Size(e))
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(pos))
	b = binary.AppendVarint(b, int64(e.Token))
	b = binary.AppendVarint(b, e.Seq)
	b = appendString(b, e.Resource)
	b = appendString(b, e.Destination)
	return string(append(b, e.Payload...))
}

// Size bounds the size of Encode's value.
func Size(e outbox.Effect) int {
	return 1 + 4*binary.MaxVarintLen64 + len(e.Resource) + len(e.Destination) + len(e.Payload)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Decode reads a value of Encode's: the effect and its place in its write.
func Decode(v []byte) (outbox.Effect, int, error) {
	if len(v) == 0 || v[0] != version {
		return outbox.Effect{}, 0, ErrMalformed
	}
	r := reader{b: v[1:]}
	pos, tok, seq := r.uvarint(), r.varint(), r.varint()
	res, dst := r.str(), r.str()
	if r.bad {
		return outbox.Effect{}, 0, ErrMalformed
	}
	e := outbox.Effect{Resource: res, Token: fence.Token(tok), Seq: seq, Destination: dst, Payload: r.b}
	return e, int(pos), nil
}

// EncodeMarker returns a parked effect's marker: why, cut to MaxReason
// bytes, and how many attempts.
func EncodeMarker(reason string, attempts int) string {
	if len(reason) > MaxReason {
		reason = reason[:MaxReason]
	}
	b := binary.AppendUvarint([]byte{version}, uint64(max(attempts, 0)))
	return string(append(b, reason...))
}

// DecodeMarker reads a value of EncodeMarker's.
func DecodeMarker(v []byte) (reason string, attempts int, err error) {
	if len(v) == 0 || v[0] != version {
		return "", 0, ErrMalformed
	}
	r := reader{b: v[1:]}
	n := r.uvarint()
	if r.bad {
		return "", 0, ErrMalformed
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
