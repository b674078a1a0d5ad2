package errfamily_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fencelock/fencelock/internal/errfamily"
)

func TestNew(t *testing.T) {
	root := errors.New("root")
	mid := errfamily.New("mid", root)
	leaf := errfamily.New("leaf", mid)
	wrapped := fmt.Errorf("%w: detail", leaf)
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"leaf matches itself", wrapped, leaf, true},
		{"leaf matches its parent", wrapped, mid, true},
		{"leaf matches the root", wrapped, root, true},
		{"parent does not match its child", mid, leaf, false},
		{"another member does not match", errfamily.New("other", root), leaf, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%v, %v): got %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
	if got, want := wrapped.Error(), "leaf: detail"; got != want {
		t.Errorf("Error: got %q, want %q", got, want)
	}
}
