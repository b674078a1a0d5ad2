package fencegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/propagate"
	"github.com/fencelock/fencelock/fence/propagate/fencegrpc"
)

// A service (here the health service's Check, writing a fenced store with
// each call's token) behind the Interceptor, and a client whose calls
// carry the lock's token: the call of a holder whose token is older than
// one the store has accepted fails with fence.ErrStale.
func ExampleInterceptor() {
	fi, err := fencegrpc.NewInterceptor()
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(fi.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, &service{store: fence.NewMemoryStore()})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), append(fencegrpc.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	for _, token := range []fence.Token{34, 33} { // 33: a paused holder's late call
		ctx, err := propagate.NewContext(context.Background(), propagate.Fencing{Name: "invoice-42", Token: token})
		if err != nil {
			log.Fatal(err)
		}
		_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
		fmt.Printf("token %d: stale %v, code %v\n", token, errors.Is(err, fence.ErrStale), status.Code(err))
	}
	// Output:
	// token 34: stale false, code OK
	// token 33: stale true, code Aborted
}
