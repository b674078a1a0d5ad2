package gcsfence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

func TestConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return newStore(t, gcsfence.WithPrefix(fencewant.Prefix(t))) })
}

// TestContention: many writers, each with a client of its own, on one key
// with values of 1 MiB: a precondition check and a write that were not
// atomic would let two writers of one generation both land.
func TestContention(t *testing.T) {
	p := fencewant.Prefix(t)
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return newStore(t, gcsfence.WithPrefix(p)) },
		fencetest.WithValueSize(1<<20), fencetest.WithWriters(8))
}
