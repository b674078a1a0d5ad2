package s3fence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	s3fence "github.com/fencelock/fencelock/fence/s3"
)

func TestConformance(t *testing.T) {
	tests := []struct {
		name  string
		fresh func(t *testing.T) fence.Store
	}{
		{"cached", func(t *testing.T) fence.Store { return newStore(t) }},
		{"no cache", func(t *testing.T) fence.Store { return newStore(t, s3fence.WithCacheSize(0)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { fencetest.Run(t, tt.fresh) })
	}
}
