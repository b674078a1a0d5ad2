package azblobfence

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

// head reads key's version with Get Blob Properties (a HEAD: no bytes of
// the value): the zero version when there is no blob. It remembers what
// it read.
func (s *Store) head(ctx context.Context, key string) (version, error) {
	p, err := s.blob(key).GetProperties(ctx, nil)
	if err != nil {
		return s.readFailure(key, err)
	}
	v, err := decode(p.ETag, p.Metadata)
	if err != nil {
		return version{}, fmt.Errorf("azblobfence: %s: %w", s.Blob(key), err)
	}
	s.cache.put(key, v)
	return v, nil
}

// download reads key's blob whole, its version and its value in one GET:
// the zero version when there is none. It remembers what it read.
func (s *Store) download(ctx context.Context, key string) (version, []byte, error) {
	r, err := s.blob(key).DownloadStream(ctx, nil)
	if err != nil {
		v, err := s.readFailure(key, err)
		return v, nil, err
	}
	defer r.Body.Close()
	v, err := decode(r.ETag, r.Metadata)
	if err != nil {
		return version{}, nil, fmt.Errorf("azblobfence: %s: %w", s.Blob(key), err)
	}
	var buf bytes.Buffer
	if r.ContentLength != nil && *r.ContentLength > 0 {
		buf.Grow(int(*r.ContentLength))
	}
	if _, err := io.Copy(&buf, r.Body); err != nil {
		return version{}, nil, fmt.Errorf("azblobfence: reading %s: %w", s.Blob(key), err)
	}
	s.cache.put(key, v)
	if v.floor {
		return v, nil, nil
	}
	return v, buf.Bytes(), nil
}

// readFailure is a read's result for err: no blob (the zero version, no
// error), or err wrapped.
func (s *Store) readFailure(key string, err error) (version, error) {
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		s.cache.drop(key)
		return version{}, nil
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return version{}, fmt.Errorf("%w: %s: %w", ErrNoContainer, s.name, err)
	}
	return version{}, fmt.Errorf("azblobfence: reading %s: %w", s.Blob(key), err)
}
