package s3fence

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// errValueRead marks an error from reading the caller's value: the request
// was cut short, so the server cannot have stored it.
var errValueRead = errors.New("s3fence: reading the value")

// errRetired is what a request body gives a transport that reads it after
// the request it belonged to has returned.
var errRetired = errors.New("s3fence: request body read after its request returned")

// objectReader is the window [start, start+n) of the bytes of an object as
// a Store writes it, the envelope header then the value, read from the
// caller's value while the request is sent. Nothing is copied, so a write's
// memory does not grow with its value; and it is seekable, as the AWS SDK
// needs to sign a request's body and to rewind it for a retry.
//
// A write's requests (its attempts, its parts) share the value, one at a
// time. retire makes a reader let go of it: an HTTP transport may still
// read a body after its request returned, and must not move the value
// under the next request, or touch it once the write has returned.
type objectReader struct {
	mu       sync.Mutex
	hdr      [HeaderSize]byte
	src      *valueSource
	start, n int64 // the window, as offsets into the object
	off      int64 // the read position within the window
	at       int64 // src.r's position relative to src.base; -1: unknown
	retired  bool
}

// valueSource is a write's value: size bytes of r from offset base.
type valueSource struct {
	r          io.ReadSeeker
	base, size int64
}

// newValueSource takes the value from r's current offset to its end.
func newValueSource(r io.ReadSeeker) (*valueSource, error) {
	base, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("%w: value is not seekable: %w", ErrInvalidArgument, err)
	}
	end, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("%w: value is not seekable: %w", ErrInvalidArgument, err)
	}
	if _, err := r.Seek(base, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%w: value is not seekable: %w", ErrInvalidArgument, err)
	}
	return &valueSource{r: r, base: base, size: max(end-base, 0)}, nil
}

func newObjectReader(h header, src *valueSource, start, n int64) *objectReader {
	return &objectReader{hdr: h.marshal(), src: src, start: start, n: n, at: -1}
}

// Read reads the window: header bytes from memory, value bytes from the
// value. A value that ends before its size is an io.ErrUnexpectedEOF.
func (r *objectReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.retired:
		return 0, errRetired
	case r.off >= r.n:
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	pos := r.start + r.off
	if pos < HeaderSize {
		k := copy(p, r.hdr[pos:])
		r.off += int64(k)
		return k, nil
	}
	return r.readValue(p, pos-HeaderSize)
}

// readValue reads p from the value at offset vpos.
func (r *objectReader) readValue(p []byte, vpos int64) (int, error) {
	if r.at != vpos {
		if _, err := r.src.r.Seek(r.src.base+vpos, io.SeekStart); err != nil {
			r.at = -1
			return 0, fmt.Errorf("%w: %w", errValueRead, err)
		}
		r.at = vpos
	}
	k, err := r.src.r.Read(p)
	r.off += int64(k)
	r.at += int64(k)
	switch {
	case err == io.EOF && r.off < r.n:
		err = fmt.Errorf("%w: it ended after %d of %d bytes: %w", errValueRead, r.at, r.src.size, io.ErrUnexpectedEOF)
	case err != nil && err != io.EOF:
		err = fmt.Errorf("%w: %w", errValueRead, err)
	}
	return k, err
}

// Seek moves within the window.
func (r *objectReader) Seek(offset int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired {
		return 0, errRetired
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.n
	default:
		return 0, fmt.Errorf("s3fence: request body: invalid whence %d", whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("s3fence: request body: negative position %d", offset)
	}
	r.off = offset
	return offset, nil
}

// retire makes every later Read and Seek fail without touching the value.
func (r *objectReader) retire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retired = true
}
