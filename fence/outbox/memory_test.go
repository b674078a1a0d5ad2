package outbox_test

import (
	"context"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/outbox"
	"github.com/fencelock/fencelock/fence/outbox/outboxtest"
)

func TestMemoryLogConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		m := outbox.NewMemoryLog()
		return outboxtest.Harness{Log: m, Record: func(ctx context.Context, c fence.Claim, effects []outbox.Effect) error {
			return m.Record(ctx, c, effects...)
		}}
	})
}
