package etcdfence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

func TestConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return newStore(t) })
}

// TestContention: many writers, each with a client of its own, on one key
// with values of 256 KiB (etcd's requests are limited to 1.5 MiB by default,
// RunContention's default values are 8 MiB).
func TestContention(t *testing.T) {
	p := prefix(t)
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return mustNew(t, etcdClient(t), p) },
		fencetest.WithValueSize(256<<10), fencetest.WithWriters(8))
}

func fenceToken(n int64) fence.Token { return fence.Token(n) }
