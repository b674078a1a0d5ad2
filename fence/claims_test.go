package fence_test

import (
	"errors"
	"slices"
	"testing"
	"time"

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

// heldLocks is a Claimer that reports its locks' end and deadline, as an
// *etcdlock.MultiLock does.
type heldLocks struct {
	claims []fence.Claim
	done   chan struct{}
	until  time.Time
}

func (h *heldLocks) Claims() []fence.Claim { return h.claims }
func (h *heldLocks) Done() <-chan struct{} { return h.done }
func (h *heldLocks) ValidUntil() time.Time { return h.until }

// UpdateHeld refuses, with ErrLockLost and nothing sent, a holder that
// knows its locks are lost or whose validity has ended; a live one writes.
func TestUpdateHeldLockLost(t *testing.T) {
	claims := []fence.Claim{{Resource: "a", Token: 3}, {Resource: "b", Token: 3}}
	lost := make(chan struct{})
	close(lost)
	for _, tt := range []struct {
		name string
		h    *heldLocks
		want error
	}{
		{"lost", &heldLocks{claims, lost, time.Now().Add(time.Hour)}, fence.ErrLockLost},
		{"validity ended", &heldLocks{claims, make(chan struct{}), time.Now().Add(-time.Second)}, fence.ErrLockLost},
		{"live", &heldLocks{claims, make(chan struct{}), time.Now().Add(time.Hour)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := fence.NewMemoryStore()
			called := false
			err := fence.UpdateHeld(t.Context(), s, tt.h, func(map[string]fence.Record) (map[string][]byte, error) {
				called = true
				return map[string][]byte{"a": []byte("1")}, nil
			})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("UpdateHeld: got %v, want %v", err, tt.want)
			}
			if called != (tt.want == nil) {
				t.Errorf("fn called: got %v, want %v", called, tt.want == nil)
			}
			if err := s.Put(t.Context(), "a", 1, []byte("x")); (err == nil) != (tt.want != nil) {
				t.Errorf("Put with token 1 afterwards: got %v; want it accepted only if nothing claimed the key", err)
			}
		})
	}
}
