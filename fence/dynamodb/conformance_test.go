package dynamofence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

// fresh wraps a Store so that the suite's keys are fresh per run.
func TestConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return newStore(t) })
}

// TestContention: many writers, each with a client of its own, on one key
// with values of 256 KiB (DynamoDB's items are limited to 400 KB).
func TestContention(t *testing.T) {
	fencetest.RunContention(t, func(t *testing.T) fence.Store { return newStore(t) },
		fencetest.WithValueSize(256<<10), fencetest.WithWriters(8))
}
