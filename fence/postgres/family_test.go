package postgres_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
)

// The package's invalid-input errors match its ErrInvalidArgument and
// fence.ErrInvalidArgument, the root of every package's.
func TestInvalidInputMatchesFamily(t *testing.T) {
	for _, err := range []error{postgres.ErrInvalidArgument, postgres.ErrInvalidOption, postgres.ErrInvalidIdentifier} {
		for _, want := range []error{postgres.ErrInvalidArgument, fence.ErrInvalidArgument} {
			if !errors.Is(err, want) {
				t.Errorf("%v: got no match for %v, want one", err, want)
			}
		}
	}
}
