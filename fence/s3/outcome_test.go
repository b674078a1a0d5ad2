package s3fence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// TestLostAnswer: the server applies the PUT but the answer is lost. Put
// reads the object back, finds its own write and reports success.
func TestLostAnswer(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "cached"}[cached], func(t *testing.T) {
			f := &faults{}
			s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
			k := key(t)
			if cached {
				mustPut(t, s, k, 4, "first")
			}
			f.lostAnswers = 1
			if err := s.Put(t.Context(), k, 4, []byte("second")); err != nil {
				t.Fatalf("Put whose answer was lost: got %v, want nil (it landed)", err)
			}
			wantRecord(t, s, k, 4, "second")
		})
	}
}

// TestLostRequest: the PUT never reaches the server. Reading back cannot
// tell a lost request from a slow one, so the outcome is unknown, and not
// stale.
func TestLostRequest(t *testing.T) {
	f := &faults{}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	k := key(t)
	mustPut(t, s, k, 4, "first")
	f.lostRequests = 1
	err := s.Put(t.Context(), k, 4, []byte("second"))
	fencewant.Unknown(t, err, 4, s3fence.ErrConflict)
	wantRecord(t, s, k, 4, "first")
}

// TestLostAnswerThenNewerHolder: our PUT lands, its answer is lost, and a
// newer holder writes before we read back. Our write did land (and was
// overwritten), so Put must not call it stale: the outcome is unknown.
func TestLostAnswerThenNewerHolder(t *testing.T) {
	k := key(t)
	newer := newStore(t)
	f := &faults{lostAnswers: 1}
	f.beforeFault = func() {
		if err := newer.Put(t.Context(), k, 9, []byte("newer")); err != nil {
			t.Errorf("newer holder's Put: got %v, want nil", err)
		}
	}
	s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
	err := s.Put(t.Context(), k, 5, []byte("older"))
	fencewant.Unknown(t, err, 5, s3fence.ErrConflict)
	wantRecord(t, newer, k, 9, "newer")
}

// TestContextEndsDuringPut: by default a PUT under way when the caller's
// context ends is allowed to finish, so Put knows and reports that it
// landed. With no grace the PUT is abandoned and the outcome is unknown.
func TestContextEndsDuringPut(t *testing.T) {
	tests := []struct {
		name        string
		opts        []s3fence.Option
		wantLanded  bool
		wantUnknown bool
	}{
		{"default grace", nil, true, false},
		{"no grace", []s3fence.Option{s3fence.WithPutGrace(0)}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f := &faults{beforePut: cancel}
			s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket, tt.opts...)
			k := key(t)
			err := s.Put(ctx, k, 4, []byte("v"))
			if tt.wantUnknown {
				fencewant.Unknown(t, err, 4, s3fence.ErrConflict)
			} else if err != nil {
				t.Fatalf("Put: got %v, want nil", err)
			}
			_, err = s.Get(t.Context(), k)
			if landed := err == nil; landed != tt.wantLanded {
				t.Fatalf("after Put, Get: got %v, want landed %v", err, tt.wantLanded)
			}
		})
	}
}

// TestServerErrorOutcome: a 501 NotImplemented says the server does not
// implement the conditional write, so nothing was written and the error says
// so; a 503 SlowDown may come from a proxy after the write went through, so
// Put reads back and, not finding its write, reports an unknown outcome.
func TestServerErrorOutcome(t *testing.T) {
	tests := []struct {
		name   string
		fault  func(*faults)
		unsupp bool
	}{
		{"501 NotImplemented", func(f *faults) { f.notImplemented = 1 }, true},
		{"503 SlowDown", func(f *faults) { f.slowDowns = 1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &faults{}
			s := mustNew(t, faultyClient(t, f), s3test.New(t).Bucket)
			k := key(t)
			mustPut(t, s, k, 4, "first")
			tt.fault(f)
			err := s.Put(t.Context(), k, 4, []byte("second"))
			if !tt.unsupp {
				fencewant.Unknown(t, err, 4, s3fence.ErrConflict)
			} else if !errors.Is(err, s3fence.ErrConditionalUnsupported) || errors.Is(err, fence.ErrUnknownOutcome) {
				t.Fatalf("Put: got %v, want s3fence.ErrConditionalUnsupported and not fence.ErrUnknownOutcome", err)
			}
			wantRecord(t, s, k, 4, "first")
		})
	}
}
