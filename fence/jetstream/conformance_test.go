package jsfence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
)

func TestConformance(t *testing.T) {
	kv, _ := bucket(t)
	s := mustNew(t, kv)
	fencetest.Run(t, func(t *testing.T) fence.Store { return s })
	t.Run("WithoutRevisionCache", func(t *testing.T) {
		s := mustNew(t, kv, jsfence.WithoutRevisionCache())
		fencetest.Run(t, func(t *testing.T) fence.Store { return s })
	})
}

// TestContention: many writers, each with a connection of its own, on one
// key with values of 256 KiB: a revision check and a write that were not
// atomic would let two writers of one revision both land.
func TestContention(t *testing.T) {
	_, name := bucket(t)
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return mustNew(t, open(t, name)) },
		fencetest.WithValueSize(256<<10), fencetest.WithWriters(8))
}
