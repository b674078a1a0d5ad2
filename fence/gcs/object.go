package gcsfence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
)

// HeaderSize is the size of the header every object of a Store begins
// with: the magic "fencegcs", a flags byte (0: a record follows; 1: no
// record, a floor only), the token, 8 bytes big-endian, and the id of the
// write, 8 random bytes (so that a write can tell its own landing from
// another's). The token is
// in the bytes, so the generation precondition covers it: a metadata
// update (which changes the metageneration, not the generation) cannot
// move it.
const HeaderSize = 25

const (
	magic     = "fencegcs"
	flagValue = 0
	flagNone  = 1
)

// object is what a read found under a key: its generation (0: none), and
// its header and value.
type object struct {
	gen   int64
	token fence.Token
	none  bool // a floor only: deleted, or claimed before any value
	id    uint64
	value []byte
}

func encode(token fence.Token, none bool, id uint64, value []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(value))
	copy(b, magic)
	if none {
		b[8] = flagNone
	}
	binary.BigEndian.PutUint64(b[9:17], uint64(token))
	binary.BigEndian.PutUint64(b[17:25], id)
	return append(b, value...)
}

func decode(key string, gen int64, b []byte, header bool) (object, error) {
	if len(b) < HeaderSize || string(b[:8]) != magic || b[8] > flagNone {
		return object{}, fmt.Errorf("%w: %q: no fencelock header", ErrCorrupt, key)
	}
	tok := fence.Token(binary.BigEndian.Uint64(b[9:17]))
	if tok <= 0 {
		return object{}, fmt.Errorf("%w: %q: token %d", ErrCorrupt, key, tok)
	}
	o := object{gen: gen, token: tok, none: b[8] == flagNone, id: binary.BigEndian.Uint64(b[17:25])}
	if !header {
		o.value = bytes.Clone(b[HeaderSize:])
	}
	return o, nil
}

// read reads key's object: its header only, or all of it.
func (s *Store) read(ctx context.Context, key string, all bool) (object, error) {
	obj := s.bucket.Object(s.prefix + key)
	var r *storage.Reader
	var err error
	if all {
		r, err = obj.NewReader(ctx)
	} else {
		r, err = obj.NewRangeReader(ctx, 0, HeaderSize)
	}
	if errors.Is(err, storage.ErrObjectNotExist) {
		return object{}, nil
	}
	if err != nil {
		switch {
		case errors.Is(err, storage.ErrBucketNotExist):
			return object{}, fmt.Errorf("%w: %s: %w", ErrNoBucket, s.name, err)
		case status(err) == http.StatusRequestedRangeNotSatisfiable: // an empty object: no header
			return object{}, fmt.Errorf("%w: %q: no fencelock header (an empty object)", ErrCorrupt, key)
		}
		return object{}, fmt.Errorf("gcsfence: reading %q: %w", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return object{}, fmt.Errorf("gcsfence: reading %q: %w", key, err)
	}
	if r.Attrs.Generation == 0 {
		return object{}, fmt.Errorf("gcsfence: reading %q: the server sent no generation with the object (with fake-gcs-server, create the client with storage.WithJSONReads())", key)
	}
	o, err := decode(key, r.Attrs.Generation, b, !all)
	if err == nil {
		s.cache.put(key, o)
	}
	return o, err
}

// writeIf writes key's object with token, if its generation is still gen
// (0: if there is none). It reports false, with no error, when the
// precondition failed: the object changed since it was read.
func (s *Store) writeIf(ctx context.Context, what, key string, gen int64, token fence.Token, none bool, value []byte) (int64, bool, error) {
	gen, ok, _, err := s.writeIfID(ctx, what, key, gen, token, none, value)
	return gen, ok, err
}

// writeIfID is writeIf, and returns the id the write carried.
func (s *Store) writeIfID(ctx context.Context, what, key string, gen int64, token fence.Token, none bool, value []byte) (int64, bool, uint64, error) {
	id := rand.Uint64()
	cond := storage.Conditions{GenerationMatch: gen}
	if gen == 0 {
		cond = storage.Conditions{DoesNotExist: true}
	}
	obj := s.bucket.Object(s.prefix + key).If(cond)
	if !resendForTest.Load() {
		// Sent once: with a buffer (ChunkSize above 0, 16 MiB by
		// default) the library resends a write with a generation
		// precondition, and a resent copy of a write that landed is
		// refused by its own generation, and would look refused.
		obj = obj.Retryer(storage.WithPolicy(storage.RetryNever))
	}
	w := obj.NewWriter(ctx)
	if !resendForTest.Load() {
		w.ChunkSize = 0 // one request, no resumable upload, and the library does not resend it
	}
	w.ContentType = "application/octet-stream"
	w.Metadata = map[string]string{"fencelock-token": strconv.FormatInt(int64(token), 10)}
	b := encode(token, none, id, value)
	// The server checks the object's CRC32C against this one, and
	// refuses a write whose bytes came short (a request cut off mid-body).
	w.CRC32C, w.SendCRC32C = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), true
	_, err := w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	var op *net.OpError
	switch code := status(err); {
	case err == nil:
		gen := w.Attrs().Generation
		s.cache.put(key, object{gen: gen, token: token, none: none, id: id})
		return gen, true, id, nil
	case code == http.StatusPreconditionFailed:
		s.cache.drop(key)
		return 0, false, id, nil
	case code == http.StatusNotFound:
		return 0, false, id, fmt.Errorf("%w: %s: %w", ErrNoBucket, s.name, err)
	case code >= 400 && code < 500:
		return 0, false, id, fmt.Errorf("gcsfence: %s %q: refused, nothing written: %w", what, key, err)
	case errors.As(err, &op) && op.Op == "dial":
		return 0, false, id, fmt.Errorf("gcsfence: %s %q: not sent: %w", what, key, err)
	}
	s.cache.drop(key)
	return 0, false, id, &fence.UnknownOutcomeError{Resource: key, Token: token, Err: err}
}

// status returns the HTTP status of an error of the server's, 0 for none:
// a JSON API error's code, or the HTTP status a gRPC client's code stands
// for (storage.NewGRPCClient reports gRPC statuses).
func status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) && ae.HTTPCode() > 0 {
		return ae.HTTPCode()
	}
	if s, ok := grpcstatus.FromError(err); ok {
		if code, ok := grpcHTTP[s.Code()]; ok {
			return code
		}
	} else if ae != nil && ae.GRPCStatus() != nil {
		if code, ok := grpcHTTP[ae.GRPCStatus().Code()]; ok {
			return code
		}
	}
	return 0
}

// grpcHTTP maps the gRPC codes of Cloud Storage's answers to the HTTP
// statuses the JSON API gives for them.
var grpcHTTP = map[codes.Code]int{
	codes.FailedPrecondition: http.StatusPreconditionFailed,
	codes.NotFound:           http.StatusNotFound,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.OutOfRange:         http.StatusRequestedRangeNotSatisfiable,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.AlreadyExists:      http.StatusConflict,
}

// resendForTest keeps the library's retries, for the control of the test
// that shows why they are off.
var resendForTest atomic.Bool

// headers caches, per key, the header and generation of the object as this
// Store last wrote or read it, so that a holder's next Put writes at once
// with ifGenerationMatch on that generation, in one request: if the
// object is still that generation, it is still those bytes and that token
// (generations never repeat); if not, the write is refused (412) and Put
// reads the object. The cache holds at most maxCached keys, and is
// emptied when full.
type headers struct {
	mu sync.Mutex
	m  map[string]object
}

const maxCached = 10000

func newHeaders() *headers { return &headers{m: map[string]object{}} }

func (h *headers) get(key string) (object, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.m[key]
	return o, ok
}

func (h *headers) put(key string, o object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) >= maxCached {
		clear(h.m)
	}
	o.value = nil
	h.m[key] = o
}

func (h *headers) drop(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, key)
}
