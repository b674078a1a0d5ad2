package outboxgrpc_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxgrpc"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/fence/propagate/fencegrpc"
)

// service answers Check with SERVING on its first run, NOT_SERVING on the
// others (so a replay tells from a second run), or with fail's error
// while fail returns one; it counts its runs.
type service struct {
	healthpb.UnimplementedHealthServer
	runs atomic.Int64
	fail func(run int64) error
}

func (s *service) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	n := s.runs.Add(1)
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return nil, err
		}
	}
	if n == 1 {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
}

// serve starts svc on loopback, with the interceptor over store unless
// store is nil (the control), and returns a client sending fencing tokens
// through fencegrpc's client interceptors.
func serve(t *testing.T, store fence.Store, svc *service) healthpb.HealthClient {
	t.Helper()
	var sopts []grpc.ServerOption
	if store != nil {
		r, err := outbox.NewReceipts(store)
		if err != nil {
			t.Fatal(err)
		}
		i, err := outboxgrpc.NewInterceptor(r)
		if err != nil {
			t.Fatal(err)
		}
		sopts = append(sopts, grpc.ChainUnaryInterceptor(i.Unary))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	healthpb.RegisterHealthServer(srv, svc)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	conn, err := grpc.NewClient(lis.Addr().String(), append(fencegrpc.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// call delivers one effect: key in the idempotency-key entry, token 7 or
// more of lock "invoice-7" in fencing-token.
func call(t *testing.T, c healthpb.HealthClient, key string, token fence.Token) (*healthpb.HealthCheckResponse, error) {
	t.Helper()
	ctx, err := propagate.NewContext(t.Context(), propagate.Fencing{Name: "invoice-7", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, outboxgrpc.MetadataKey, key)
	}
	return c.Check(ctx, &healthpb.HealthCheckRequest{})
}

// TestDuplicateRunsOnce: a call delivered twice runs the handler once,
// the second gets the first response. The control, without the
// interceptor, runs it twice.
func TestDuplicateRunsOnce(t *testing.T) {
	testDuplicateRunsOnce(t, fence.NewMemoryStore())
}

func testDuplicateRunsOnce(t *testing.T, store fence.Store) {
	t.Helper()
	for _, tc := range []struct {
		name     string
		store    fence.Store
		wantRuns int64
	}{
		{"interceptor", store, 1},
		{"control: no interceptor", nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &service{}
			c := serve(t, tc.store, svc)
			first, err1 := call(t, c, "k-dup", 7)
			second, err2 := call(t, c, "k-dup", 7)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if got := svc.runs.Load(); got != tc.wantRuns {
				t.Fatalf("got %d runs, want %d", got, tc.wantRuns)
			}
			if tc.wantRuns == 1 && second.GetStatus() != first.GetStatus() {
				t.Fatalf("repeat: got %v, want the first response %v", second.GetStatus(), first.GetStatus())
			}
		})
	}
}

// TestStaleTokenRefused: once token 8 is accepted, a call with token 7
// gets fencegrpc's stale refusal and the handler does not run; so does
// its repeat; a repeat of a call accepted before token 8 came gets its
// first answer. The control runs the stale call.
func TestStaleTokenRefused(t *testing.T) {
	testStaleTokenRefused(t, fence.NewMemoryStore())
}

func testStaleTokenRefused(t *testing.T, store fence.Store) {
	t.Helper()
	svc := &service{}
	c := serve(t, store, svc)
	if _, err := call(t, c, "k-old", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, c, "k-new", 8); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := call(t, c, "k-late", 7)
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Current != 8 || status.Code(err) != codes.Aborted {
			t.Fatalf("late call %d: got %v, want an Aborted stale refusal naming token 8", i+1, err)
		}
	}
	if got := svc.runs.Load(); got != 2 {
		t.Fatalf("got %d runs, want 2: the stale call must not run the handler", got)
	}
	if resp, err := call(t, c, "k-old", 7); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("repeat of the first call: got %v, %v, want its first response, SERVING", resp.GetStatus(), err)
	}

	t.Run("control: no interceptor", func(t *testing.T) {
		svc := &service{}
		c := serve(t, nil, svc)
		_, _ = call(t, c, "k-new", 8)
		if _, err := call(t, c, "k-late", 7); err != nil || svc.runs.Load() != 2 {
			t.Fatalf("got %v and %d runs, want the unprotected handler to run the stale call", err, svc.runs.Load())
		}
	})
}

// TestErrorsKeptOrNot: an error a retry would meet again (NotFound) is
// kept and replayed; one a caller retries (Unavailable) is not.
func TestErrorsKeptOrNot(t *testing.T) {
	for _, tc := range []struct {
		code     codes.Code
		wantRuns int64
	}{
		{codes.NotFound, 1},
		{codes.Unavailable, 2},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			svc := &service{fail: func(run int64) error {
				if run == 1 {
					return status.Error(tc.code, "first run fails")
				}
				return nil
			}}
			c := serve(t, fence.NewMemoryStore(), svc)
			_, err1 := call(t, c, "k", 7)
			_, err2 := call(t, c, "k", 7)
			if status.Code(err1) != tc.code || svc.runs.Load() != tc.wantRuns {
				t.Fatalf("got %v then %v, %d runs, want %v first and %d runs", err1, err2, svc.runs.Load(), tc.code, tc.wantRuns)
			}
			if tc.wantRuns == 1 && (status.Code(err2) != tc.code || status.Convert(err2).Message() != "first run fails") {
				t.Fatalf("repeat: got %v, want the first error replayed", err2)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	svc := &service{}
	c := serve(t, fence.NewMemoryStore(), svc)
	if _, err := call(t, c, "", 7); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("no key: got %v, want FailedPrecondition", err)
	}
	if _, err := call(t, c, "a b", 7); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad key: got %v, want InvalidArgument", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), outboxgrpc.MetadataKey, "k")
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); !errors.Is(err, propagate.ErrMissing) {
		t.Errorf("no fencing token: got %v, want an error matching propagate.ErrMissing", err)
	}
	if svc.runs.Load() != 0 {
		t.Errorf("got %d runs, want none", svc.runs.Load())
	}
	if i, err := outboxgrpc.NewInterceptor(nil); i != nil || !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("NewInterceptor(nil): got %v, %v, want an error matching fence.ErrInvalidArgument", i, err)
	}
}
