package s3fence

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// HeaderSize is the length in bytes of the envelope header that starts every
// object a [Store] writes; the caller's value follows it. See the package
// documentation for the layout.
const HeaderSize = 32

// MetadataToken is the user-metadata key (x-amz-meta-fence-token) under which
// a [Store] also records the token in decimal, for tools that do not read the
// body. The envelope, not this copy, is what the Store trusts.
const MetadataToken = "fence-token"

const (
	magic = "fencelk"
	// The byte after the magic: the format version (1), and the kind of
	// object in that format.
	kindValue     = 1 // the caller's value follows the header
	kindTombstone = 2 // written by Store.Delete: no value, the key reads as not found
)

// writeID identifies one Put call, so that the ETag changes with every write
// (even byte-identical rewrites by the same holder) and a write can recognise
// itself when it reads the object back.
type writeID [16]byte

func newWriteID() writeID {
	var id writeID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+).
	return id
}

// header is the decoded envelope header.
type header struct {
	token   fence.Token
	id      writeID
	deleted bool // a tombstone
}

// marshal returns the envelope header for h.
func (h header) marshal() [HeaderSize]byte {
	var b [HeaderSize]byte
	copy(b[:], magic)
	b[len(magic)] = kindValue
	if h.deleted {
		b[len(magic)] = kindTombstone
	}
	binary.BigEndian.PutUint64(b[8:16], uint64(h.token))
	copy(b[16:HeaderSize], h.id[:])
	return b
}

// encode returns the object bytes for value under h. Writes do not use it:
// they stream the header and the value (see objectReader).
func encode(h header, value []byte) []byte {
	b := h.marshal()
	return append(b[:], value...)
}

// decodeHeader parses the first HeaderSize bytes of an object.
func decodeHeader(b []byte) (header, error) {
	if len(b) < HeaderSize || !bytes.Equal(b[:len(magic)], []byte(magic)) {
		return header{}, ErrForeignObject
	}
	kind := b[len(magic)]
	if kind != kindValue && kind != kindTombstone {
		return header{}, fmt.Errorf("%w: unsupported envelope version %d", ErrForeignObject, kind)
	}
	h := header{token: fence.Token(binary.BigEndian.Uint64(b[8:16])), deleted: kind == kindTombstone}
	if !h.token.Valid() {
		return header{}, fmt.Errorf("%w: envelope carries token %d", ErrForeignObject, h.token)
	}
	copy(h.id[:], b[16:HeaderSize])
	return h, nil
}

// Decode splits the bytes of an object written by a [Store] into its token
// and value, for objects fetched by other means (the AWS CLI, a replica). It
// returns an error matching [fence.ErrNotFound] for a tombstone left by
// [Store.Delete], and one matching [ErrForeignObject] for anything else. The
// returned Value aliases object.
func Decode(object []byte) (fence.Record, error) {
	h, err := decodeHeader(object)
	if err != nil {
		return fence.Record{}, err
	}
	if h.deleted {
		return fence.Record{}, fmt.Errorf("%w: tombstone written with token %d", fence.ErrNotFound, h.token)
	}
	return fence.Record{Value: object[HeaderSize:], Token: h.token}, nil
}
