package s3fence_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// stripConditions removes If-Match and If-None-Match from every request
// before it is signed: the client then talks to a server that ignores
// conditional writes (or through a proxy that drops the headers).
func stripConditions(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Build.Add(middleware.BuildMiddlewareFunc("fencelockStripConditions",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					req.Header.Del("If-Match")
					req.Header.Del("If-None-Match")
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	})
}

// ignoringStore returns a store whose server ignores conditional writes.
func ignoringStore(t *testing.T, opts ...s3fence.Option) *s3fence.Store {
	t.Helper()
	return mustNew(t, client(t, s3test.WithS3Options(stripConditions)), s3test.New(t).Bucket, opts...)
}

func TestCheckConditionalWrites(t *testing.T) {
	tests := []struct {
		name  string
		store func(*testing.T) *s3fence.Store
		want  error
	}{
		{"server honours them", func(t *testing.T) *s3fence.Store { return newStore(t) }, nil},
		{"headers stripped", func(t *testing.T) *s3fence.Store { return ignoringStore(t) }, s3fence.ErrConditionalUnsupported},
		{"501 NotImplemented", func(t *testing.T) *s3fence.Store {
			return mustNew(t, client(t, s3test.WithRoundTripper(notImplemented)), s3test.New(t).Bucket)
		}, s3fence.ErrConditionalUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.store(t).CheckConditionalWrites(t.Context())
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("CheckConditionalWrites: got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestStaleWriteOnServerIgnoringConditions: A writes 33, B writes 34, and A,
// paused, writes 33 again from its cached ETag. On a server that ignores
// If-Match the late write lands (the control, with the check turned off);
// with the check, the Store refuses to write at all and the object keeps B's
// write.
func TestStaleWriteOnServerIgnoringConditions(t *testing.T) {
	tests := []struct {
		name      string
		opts      []s3fence.Option
		wantToken fence.Token
	}{
		{"checked", nil, 34},
		{"control, check off", []s3fence.Option{s3fence.WithConditionalCheck(false)}, 33},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(t)
			a, b := ignoringStore(t, tt.opts...), newStore(t)
			errA1 := a.Put(t.Context(), k, 33, []byte("a1"))
			mustPut(t, b, k, 34, "b")
			errA2 := a.Put(t.Context(), k, 33, []byte("a2"))
			if got := mustGet(t, b, k).Token; got != tt.wantToken {
				t.Errorf("object's token after A's late Put: got %d, want %d", got, tt.wantToken)
			}
			if tt.wantToken == 34 {
				for i, err := range []error{errA1, errA2} {
					if !errors.Is(err, s3fence.ErrConditionalUnsupported) {
						t.Errorf("A's Put #%d: got %v, want s3fence.ErrConditionalUnsupported", i+1, err)
					}
				}
			}
		})
	}
}

// notImplemented wraps a transport so that every PUT is answered 501, as by
// a server that does not implement conditional writes.
func notImplemented(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodPut {
			return next.RoundTrip(req)
		}
		closeBody(req)
		return errorResponse(req, http.StatusNotImplemented, "NotImplemented", "A header you provided implies functionality that is not implemented"), nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
