package fencegrpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/fence/propagate/fencegrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is a gRPC service (the health service's two methods, a unary
// and a server-streaming one) that writes a fenced store with the token
// of each call: Service "write" writes key "k", and answers SERVING with
// the call's lock name; it counts its calls.
type service struct {
	healthpb.UnimplementedHealthServer
	store *fence.MemoryStore
	calls atomic.Int64
}

func (s *service) write(ctx context.Context) (*healthpb.HealthCheckResponse, error) {
	s.calls.Add(1)
	f, ok := propagate.FromContext(ctx)
	if !ok {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_UNKNOWN}, nil
	}
	if err := s.store.Put(ctx, "k", f.Token, []byte(f.Name)); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *service) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return s.write(ctx)
}

func (s *service) Watch(_ *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	resp, err := s.write(stream.Context())
	if err != nil {
		return err
	}
	return stream.Send(resp)
}

// serve starts the service on loopback with server options sopts and
// returns it and a client whose connection has dopts.
func serve(t *testing.T, sopts []grpc.ServerOption, dopts []grpc.DialOption) (*service, healthpb.HealthClient) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &service{store: fence.NewMemoryStore()}
	srv := grpc.NewServer(sopts...)
	healthpb.RegisterHealthServer(srv, svc)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	conn, err := grpc.NewClient(lis.Addr().String(), append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return svc, healthpb.NewHealthClient(conn)
}

func fenced(t *testing.T, opts ...fencegrpc.Option) (*service, healthpb.HealthClient) {
	t.Helper()
	fi, err := fencegrpc.NewInterceptor(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, fi.ServerOptions(), fencegrpc.DialOptions())
}

func withFencing(t *testing.T, ctx context.Context, name string, token fence.Token) context.Context {
	t.Helper()
	ctx, err := propagate.NewContext(ctx, propagate.Fencing{Name: name, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// call makes the unary or the streaming call and returns its error.
func call(ctx context.Context, c healthpb.HealthClient, stream bool) error {
	if !stream {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// The token reaches the handler, whose fenced store then refuses an older
// one: the client sees fence.ErrStale, with the tokens, and the status
// Aborted. The store keeps the newer write.
func TestCarriedAndStale(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			svc, c := fenced(t)
			if err := call(withFencing(t, t.Context(), "job", 34), c, stream); err != nil {
				t.Fatalf("token 34: got %v, want nil", err)
			}
			err := call(withFencing(t, t.Context(), "job", 33), c, stream)
			var se *fence.StaleError
			if !errors.As(err, &se) || se.Resource != "job" || se.Token != 33 || se.Current != 34 || status.Code(err) != codes.Aborted {
				t.Fatalf("token 33: got %v (code %v), want a *fence.StaleError for job, 33, current 34, code Aborted", err, status.Code(err))
			}
			if rec, err := svc.store.Get(t.Context(), "k"); err != nil || rec.Token != 34 {
				t.Fatalf("store: got %+v, %v; want token 34", rec, err)
			}
		})
	}
}

// The call's issuer reaches the handler's context: the store refuses
// another issuer's higher token. The control: the same token with no
// issuer named lands, compared by token alone.
func TestIssuerCarried(t *testing.T) {
	svc, c := fenced(t)
	with := func(token fence.Token, issuer string) context.Context {
		ctx, err := propagate.NewContext(t.Context(), propagate.Fencing{Name: "job", Token: token, Issuer: issuer})
		if err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	if err := call(with(5, "a"), c, false); err != nil {
		t.Fatalf("issuer a, token 5: got %v, want nil", err)
	}
	if err := call(with(9, "b"), c, false); err == nil || !strings.Contains(err.Error(), "issuer") {
		t.Fatalf("issuer b, token 9: got %v, want the store's issuer mismatch", err)
	}
	if rec, err := svc.store.Get(t.Context(), "k"); err != nil || rec.Token != 5 {
		t.Fatalf("store: got %+v, %v; want token 5", rec, err)
	}
	if err := call(with(9, ""), c, false); err != nil {
		t.Fatalf("control, no issuer, token 9: got %v, want nil", err)
	}
}

// Calls without a token, or with one that does not parse, are refused
// before the handler runs. The control, a server without the interceptor,
// runs the handler for the call without a token.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name      string
		md        []string // raw metadata, sent without the client interceptors' Fencing
		code      codes.Code
		want      error
		wantCalls int64
		control   bool
	}{
		{"missing", nil, codes.FailedPrecondition, propagate.ErrMissing, 0, false},
		{"invalid", []string{fencegrpc.MetadataKey, `name="a"; token=-1`}, codes.InvalidArgument, propagate.ErrInvalidHeader, 0, false},
		{"twice", []string{fencegrpc.MetadataKey, `name="a"; token=1`, fencegrpc.MetadataKey, `name="a"; token=2`},
			codes.InvalidArgument, propagate.ErrInvalidHeader, 0, false},
		{"control: no interceptor", nil, codes.OK, nil, 1, true},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/unary", true: "/stream"}[stream], func(t *testing.T) {
				svc, c := fenced(t)
				if tt.control {
					svc, c = serve(t, nil, nil)
				}
				ctx := metadata.AppendToOutgoingContext(t.Context(), tt.md...)
				err := call(ctx, c, stream)
				if status.Code(err) != tt.code || !errors.Is(err, tt.want) || svc.calls.Load() != tt.wantCalls {
					t.Fatalf("got %v (code %v) and %d handler calls, want code %v matching %v and %d calls",
						err, status.Code(err), svc.calls.Load(), tt.code, tt.want, tt.wantCalls)
				}
			})
		}
	}
}

// WithRequired(false) lets a call without a token through.
func TestOptional(t *testing.T) {
	svc, c := fenced(t, fencegrpc.WithRequired(false))
	resp, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_UNKNOWN || svc.calls.Load() != 1 {
		t.Fatalf("got %v, %v, %d calls; want UNKNOWN (no Fencing in the handler), nil, 1 call", resp, err, svc.calls.Load())
	}
}

func TestNilOption(t *testing.T) {
	if _, err := fencegrpc.NewInterceptor(nil); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("NewInterceptor(nil): got %v, want fence.ErrInvalidArgument", err)
	}
}

// A fencing-token entry put in the outgoing metadata by hand under another
// case of its key (an MD map written directly) is replaced by the
// context's Fencing like any other: the service sees the context's token.
// The control puts it with metadata.Pairs, which lower-cases the key.
func TestClientReplacesHandSetEntryOfAnyCase(t *testing.T) {
	in, err := fencegrpc.NewInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	svc, client := serve(t, in.ServerOptions(), fencegrpc.DialOptions())
	for _, md := range []metadata.MD{{"Fencing-Token": {`name="old"; token=3`}}, metadata.Pairs("Fencing-Token", `name="old"; token=3`)} {
		ctx := metadata.NewOutgoingContext(t.Context(), md)
		ctx, err := propagate.NewContext(ctx, propagate.Fencing{Name: "acct-7", Token: 812})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("Check with %v set by hand: got %v, want nil", md, err)
		}
		if got, err := svc.store.Get(t.Context(), "k"); err != nil || got.Token != 812 {
			t.Fatalf("store after Check with %v set by hand: got %+v, %v; want token 812", md, got, err)
		}
	}
}

// A call without a token, let through by WithRequired(false), names no
// issuer in the handler's context, though an interceptor before ours put
// one there. The control: the same chain without our interceptor keeps it.
func TestOptionalClearsIssuer(t *testing.T) {
	fi, err := fencegrpc.NewInterceptor(fencegrpc.WithRequired(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ours bool
		want string
	}{{"interceptor", true, ""}, {"control: no interceptor", false, "etcd-prod"}} {
		t.Run(tt.name, func(t *testing.T) {
			var got atomic.Value
			before := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				return h(fence.ContextWithIssuer(ctx, "etcd-prod"), req)
			}
			after := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				got.Store(fence.IssuerFromContext(ctx))
				return h(ctx, req)
			}
			chain := []grpc.UnaryServerInterceptor{before, after}
			if tt.ours {
				chain = []grpc.UnaryServerInterceptor{before, fi.Unary, after}
			}
			_, c := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(chain...)}, nil)
			if err := call(t.Context(), c, false); err != nil {
				t.Fatal(err)
			}
			if got.Load() != tt.want {
				t.Fatalf("issuer in the handler's context: got %q, want %q", got.Load(), tt.want)
			}
		})
	}
}
