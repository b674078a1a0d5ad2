package azblobfence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

func TestConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return newStore(t, azblobfence.WithPrefix(fencewant.Prefix(t))) })
}

// TestContention: many writers, each with a client of its own, on one key
// with values of 1 MiB: a condition check and a write that were not
// atomic would let two writers of one ETag both land.
func TestContention(t *testing.T) {
	testenv.Long(t, "8 writers of 1 MiB values on one blob, 8 rounds: about 1 s")
	p := fencewant.Prefix(t)
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return newStore(t, azblobfence.WithPrefix(p)) },
		fencetest.WithValueSize(1<<20), fencetest.WithWriters(8))
}
