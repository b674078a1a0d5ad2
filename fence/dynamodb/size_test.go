package dynamofence_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
)

// The largest value MaxValueSize allows lands, whole, on a server that
// enforces DynamoDB's 400 KB item limit (dynalite does; minidyn has none),
// and one byte more is refused with ErrTooLarge before it is sent, by
// Put, Update and UpdateAll alike, the record left as it was.
func TestTooLarge(t *testing.T) {
	s := newStore(t)
	k := prefix(t) + "big"
	n := s.MaxValueSize(k)
	if n < 399<<10 || n >= dynamofence.MaxItemSize {
		t.Fatalf("MaxValueSize(%q): got %d, want a little under %d", k, n, dynamofence.MaxItemSize)
	}
	fits := bytes.Repeat([]byte{'v'}, n)
	mustPut(t, s, k, 1, string(fits))
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
	wantRecord(t, s, k, 1, string(fits))
}
