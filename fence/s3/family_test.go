package s3fence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
)

// The package's invalid-input errors match its ErrInvalidArgument and
// fence.ErrInvalidArgument, the root of every package's.
func TestInvalidInputMatchesFamily(t *testing.T) {
	for _, err := range []error{s3fence.ErrInvalidArgument, s3fence.ErrInvalidOption} {
		for _, want := range []error{s3fence.ErrInvalidArgument, fence.ErrInvalidArgument} {
			if !errors.Is(err, want) {
				t.Errorf("%v: got no match for %v, want one", err, want)
			}
		}
	}
}
