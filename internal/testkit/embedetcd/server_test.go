package embedetcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
)

// client returns a client of eps, closed when the test ends.
func client(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestGrantsOneSecondLeases(t *testing.T) {
	tests := []struct {
		name      string
		endpoints func(t *testing.T) []string
	}{
		{"in-process server", func(t *testing.T) []string { return embedetcd.NewServer(t).Endpoints() }},
		{"one-member cluster", func(t *testing.T) []string { return embedetcd.New(t, 1).Endpoints() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := client(t, tt.endpoints(t))
			resp, err := cli.Grant(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if resp.TTL != 1 {
				t.Fatalf("granted TTL: got %d, want 1", resp.TTL)
			}
		})
	}
}
