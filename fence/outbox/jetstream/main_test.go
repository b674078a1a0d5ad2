package jetstream_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// TestMain starts the nats-server the tests share.
func TestMain(m *testing.M) { goleak.VerifyTestMain(natstest.Main(m)) }
