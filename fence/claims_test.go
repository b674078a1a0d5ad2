package fence_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

func TestSortClaims(t *testing.T) {
	got, err := fence.SortClaims([]fence.Claim{{"b", 4}, {"a", 3}, {"b", 4}})
	if want := []fence.Claim{{"a", 3}, {"b", 4}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("SortClaims: got %v, %v, want %v", got, err, want)
	}
	bad := []struct {
		name   string
		claims []fence.Claim
		want   error
	}{
		{"none", nil, fence.ErrInvalidArgument},
		{"two tokens for one resource", []fence.Claim{{"a", 3}, {"a", 4}}, fence.ErrInvalidArgument},
		{"empty resource", []fence.Claim{{"", 3}}, fence.ErrInvalidKey},
		{"zero token", []fence.Claim{{"a", 0}}, fence.ErrInvalidToken},
	}
	for _, tt := range bad {
		if _, err := fence.SortClaims(tt.claims); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want an error matching %v", tt.name, err, tt.want)
		}
	}
}

func TestUpdateHeldNilStore(t *testing.T) {
	var typedNil *fence.MemoryStore
	for _, s := range []fence.AllUpdater{nil, typedNil} {
		err := fence.UpdateHeld(t.Context(), s, nil, func(map[string]fence.Record) (map[string][]byte, error) { return nil, nil })
		if !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("UpdateHeld(%#v): got %v, want an error matching fence.ErrInvalidArgument", s, err)
		}
	}
}
