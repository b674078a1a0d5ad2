package s3fence

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"fmt"
)

// sseCKeySize is the length of an SSE-C key: AES-256.
const sseCKeySize = 32

// sseCustomerKey is an SSE-C key as the request headers carry it.
type sseCustomerKey struct {
	algorithm, key, keyMD5 string
}

// WithSSECustomerKey makes a [Store] encrypt the objects it writes with a
// key the caller provides and S3 does not keep (SSE-C, AES-256), and send
// the key with every request that touches object data: its PutObject
// requests, its reads ([Store.Get], [Store.Open] and the ranged reads of
// the current version before a write), and every step of a multipart
// upload. S3 needs the same key to read such an object back, so every Store
// writing or reading a key must be given the same one; a Store without it,
// or with another, fails to read the object (400 or 403 from S3). The
// conditional-write check's probe object is written without it. Default:
// no SSE-C. key must be 32 bytes; New keeps a copy. AWS accepts SSE-C only
// over HTTPS.
//
// A key given through [WithPutInput] is refused: SSE-C set for one write
// only would leave the Store unable to read the object it wrote.
func WithSSECustomerKey(key []byte) Option {
	k := bytes.Clone(key)
	return optionFunc(func(o *options) { o.sseKey, o.sseSet = k, true })
}

// newSSECustomerKey checks key and encodes it for the headers.
func newSSECustomerKey(key []byte) (*sseCustomerKey, error) {
	if len(key) != sseCKeySize {
		return nil, fmt.Errorf("%w: WithSSECustomerKey: key of %d bytes, want %d (AES-256)", ErrInvalidOption, len(key), sseCKeySize)
	}
	sum := md5.Sum(key)
	return &sseCustomerKey{
		algorithm: "AES256",
		key:       base64.StdEncoding.EncodeToString(key),
		keyMD5:    base64.StdEncoding.EncodeToString(sum[:]),
	}, nil
}

// sseC sets a request's SSE-C fields, if the Store has a key.
func (s *Store) sseC(algorithm, key, keyMD5 **string) {
	if k := s.opts.sse; k != nil {
		*algorithm, *key, *keyMD5 = &k.algorithm, &k.key, &k.keyMD5
	}
}
