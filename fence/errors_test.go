package fence_test

import (
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// fence's invalid-input errors match ErrInvalidArgument, the root of every
// package's invalid-input errors.
func TestInvalidInputMatchesFamily(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"ErrInvalidToken", fence.ErrInvalidToken, fence.ErrInvalidToken},
		{"ErrInvalidKey", fence.ErrInvalidKey, fence.ErrInvalidKey},
		{"Token.Validate(0)", fence.Token(0).Validate(), fence.ErrInvalidToken},
		{"NewGuard, zero token", func() error { _, err := fence.NewGuard(newHolder(0)); return err }(), fence.ErrInvalidToken},
		{"Put, empty key", fence.NewMemoryStore().Put(t.Context(), "", 1, nil), fence.ErrInvalidKey},
		{"Put, negative token", fence.NewMemoryStore().Put(t.Context(), "k", -1, nil), fence.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, want := range []error{tt.want, fence.ErrInvalidArgument} {
				if !errors.Is(tt.err, want) {
					t.Errorf("got %v, want an error matching %v", tt.err, want)
				}
			}
		})
	}
}
