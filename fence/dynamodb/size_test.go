package dynamofence_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// The largest value MaxValueSize allows lands, whole, on a server that
// enforces DynamoDB's 400 KB item limit (dynalite does; minidyn has none),
// and one byte more is refused with ErrTooLarge before it is sent, by
// Put, Update and UpdateAll alike, the record left as it was.
func TestTooLarge(t *testing.T) {
	s := newStore(t)
	k := fencewant.Prefix(t) + "big"
	n := s.MaxValueSize(k)
	if n < 399<<10 || n >= dynamofence.MaxItemSize {
		t.Fatalf("MaxValueSize(%q): got %d, want a little under %d", k, n, dynamofence.MaxItemSize)
	}
	fits := bytes.Repeat([]byte{'v'}, n)
	fencewant.Put(t, s, k, 1, string(fits))
	over := append(fits, 'v')
	for _, tt := range []struct {
		name  string
		write func() error
	}{
		{"Put", func() error { return s.Put(t.Context(), k, 2, over) }},
		{"Update", func() error {
			return s.Update(t.Context(), k, 2, func(fence.Record) ([]byte, error) { return over, nil })
		}},
		{"UpdateAll", func() error {
			return s.UpdateAll(t.Context(), []fence.Claim{{Resource: k, Token: 2}},
				func(map[string]fence.Record) (map[string][]byte, error) { return map[string][]byte{k: over}, nil })
		}},
	} {
		if err := tt.write(); !errors.Is(err, dynamofence.ErrTooLarge) || !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("%s of %d bytes: got %v, want an error matching ErrTooLarge and fence.ErrInvalidArgument", tt.name, len(over), err)
		}
	}
	fencewant.Record(t, s, k, 1, string(fits))
}

// A claim whose reply is a large item is not lost to the client. Sent
// once with the SDK's body as it is (the control), net/http closes the
// connection under the reply about once in a hundred claims of a 400 KB
// item here (aws/aws-sdk-go-v2#2737), each such claim an unknown outcome;
// with the body's WriteTo hidden, none in a thousand is.
func TestLargeReplyNotLost(t *testing.T) {
	testenv.Long(t, "claims a 400 KB item a thousand times or more")
	// claims claims a large item up to n times, and returns how many
	// claims lost their reply, stopping at the first if stop.
	claims := func(t *testing.T, n int, stop bool) (lost, sent int) {
		s := newStore(t)
		k := fencewant.Prefix(t) + "big"
		fencewant.Put(t, s, k, 1, string(bytes.Repeat([]byte{'v'}, s.MaxValueSize(k))))
		for tok := fence.Token(2); sent < n && !(stop && lost > 0); tok++ {
			_, err := s.GetForUpdate(t.Context(), k, tok)
			sent++
			switch {
			case errors.Is(err, fence.ErrUnknownOutcome):
				lost++
			case err != nil:
				t.Fatalf("GetForUpdate(%q, %d): got %v, want nil", k, tok, err)
			}
		}
		return lost, sent
	}
	t.Run("control", func(t *testing.T) {
		defer dynamofence.KeepWriteToForTest()()
		lost, sent := claims(t, 5000, true)
		if lost == 0 {
			t.Errorf("with the body's WriteTo kept: no reply lost in %d claims, want one (the race this test guards against did not show)", sent)
		}
		t.Logf("the first reply lost after %d claims", sent)
	})
	t.Run("hidden", func(t *testing.T) {
		if lost, sent := claims(t, 1000, false); lost > 0 {
			t.Errorf("%d of %d claims lost their reply (use of closed network connection), want none", lost, sent)
		}
	})
}
