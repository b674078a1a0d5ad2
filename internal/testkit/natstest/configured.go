package natstest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/internal/testkit/childproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// NewConfigured starts a nats-server with JetStream for t, configured by
// conf (accounts, users, permissions: the listen address and store
// directory are added), and stops it when t ends. It checks the server is
// ready by connecting with opts (the credentials of a user JetStream is
// enabled for). Without nats-server it skips t, or fails it when CI is
// "true".
func NewConfigured(t testing.TB, conf string, opts ...nats.Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		testenv.Unavailable(t, "natstest: no nats-server to configure", "install nats-server (bash .ci/setup.sh, or apt-get install -y nats-server)")
	}
	dir := testenv.TempDir(t)
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := startNode(t, bin, dir, 0, ports[0], 0, nil, conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	if err := s.proc.AwaitReady(ctx, func(ctx context.Context) error { return pingWith(ctx, s.url, opts) }); err != nil {
		t.Fatalf("natstest: %s: %v", s.url, err)
	}
	return s
}

// pingWith connects to url with opts and asks JetStream for the
// account's information.
func pingWith(ctx context.Context, url string, opts []nats.Option) error {
	nc, err := nats.Connect(url, append([]nats.Option{nats.NoReconnect(), nats.Timeout(time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}
