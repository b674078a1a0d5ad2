package azblobfence

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/fencelock/fencelock/fence"
)

// The metadata a Store writes with every blob (x-ms-meta-…). Azure
// returns metadata names in the case they were written in, or, through
// Go's header canonicalisation, with a capital first letter: a Store
// reads them in any case.
const (
	// MetadataToken holds the write's token, in decimal.
	MetadataToken = "fencelock_token"
	// MetadataWrite holds the write's id: 32 hex digits, random, one per
	// write, with which a write recognises itself when it reads the blob
	// back after its reply was lost, or after a copy of it was delivered
	// twice.
	MetadataWrite = "fencelock_write"
	// MetadataKind is "value" when the blob's bytes are the record's
	// value, "floor" when the blob holds no record, only the token (left
	// by [Store.Delete], or by a claim of a key with no value).
	MetadataKind = "fencelock_kind"
)

const (
	kindValue = "value"
	kindFloor = "floor"
)

// writeID identifies one write.
type writeID [16]byte

func newWriteID() writeID {
	var id writeID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+).
	return id
}

// version is a blob as a read or a write saw it: its ETag ("" for no
// blob) and its fencelock metadata.
type version struct {
	etag  azcore.ETag
	token fence.Token
	id    writeID
	floor bool // no record: a floor only
}

// exists reports whether there is a blob.
func (v version) exists() bool { return v.etag != "" }

// hasValue reports whether the blob holds a record.
func (v version) hasValue() bool { return v.exists() && !v.floor }

// metadata returns the blob metadata of a write of v.
func (v version) metadata() map[string]*string {
	kind := kindValue
	if v.floor {
		kind = kindFloor
	}
	return map[string]*string{
		MetadataToken: ptr(strconv.FormatInt(int64(v.token), 10)),
		MetadataWrite: ptr(hex.EncodeToString(v.id[:])),
		MetadataKind:  ptr(kind),
	}
}

func ptr(s string) *string { return &s }

// decode reads a blob's version from its ETag and metadata: an error
// matching [ErrForeignBlob] when they are not a Store's.
func decode(etag *azcore.ETag, meta map[string]*string) (version, error) {
	if etag == nil || *etag == "" {
		return version{}, fmt.Errorf("azblobfence: the server sent no ETag with the blob, so no conditional write can follow")
	}
	tok, err := strconv.ParseInt(lookup(meta, MetadataToken), 10, 64)
	if err != nil || tok <= 0 {
		return version{}, fmt.Errorf("%w: %s %q", ErrForeignBlob, MetadataToken, lookup(meta, MetadataToken))
	}
	v := version{etag: *etag, token: fence.Token(tok)}
	if id, err := hex.DecodeString(lookup(meta, MetadataWrite)); err == nil && len(id) == len(v.id) {
		copy(v.id[:], id)
	}
	switch kind := lookup(meta, MetadataKind); kind {
	case kindValue:
	case kindFloor:
		v.floor = true
	default:
		return version{}, fmt.Errorf("%w: %s %q", ErrForeignBlob, MetadataKind, kind)
	}
	return v, nil
}

// lookup returns meta's value for name, whatever its case, or "".
func lookup(meta map[string]*string, name string) string {
	for k, v := range meta {
		if v != nil && strings.EqualFold(k, name) {
			return *v
		}
	}
	return ""
}
