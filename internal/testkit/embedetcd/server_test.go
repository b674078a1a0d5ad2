package embedetcd_test

import (
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/otheretcd"
)

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
			cli := otheretcd.Client(t, tt.endpoints(t)...)
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
