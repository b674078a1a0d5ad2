package fence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// BenchmarkMemoryUpdate is a MemoryStore's Update of one key (a 1 KiB
// value) by its holder, the loop's own cost with no I/O around it.
func BenchmarkMemoryUpdate(b *testing.B) {
	s := fence.NewMemoryStore()
	v := make([]byte, 1024)
	fn := func(fence.Record) ([]byte, error) { return v, nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Update(b.Context(), "k", 1, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryUpdateAll is a MemoryStore's UpdateAll of two keys.
func BenchmarkMemoryUpdateAll(b *testing.B) {
	s := fence.NewMemoryStore()
	v := make([]byte, 1024)
	claims := []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}}
	fn := func(map[string]fence.Record) (map[string][]byte, error) {
		return map[string][]byte{"a": v, "b": v}, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.UpdateAll(b.Context(), claims, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// noopRounds is an UpdateRounds that does nothing: BenchmarkRunUpdate
// measures the loop alone.
type noopRounds struct{ rec fence.Record }

func (r *noopRounds) ClaimRead(context.Context, string, fence.Token) (fence.Record, uint64, error) {
	return r.rec, 1, nil
}

func (r *noopRounds) WriteIf(context.Context, string, fence.Token, uint64, []byte) error { return nil }

// BenchmarkRunUpdate is the loop's own cost: RunUpdate over rounds that
// do nothing ("loop"), beside the same round written inline ("inline"),
// as the adapters had it.
func BenchmarkRunUpdate(b *testing.B) {
	r := &noopRounds{rec: fence.Record{Value: []byte("v"), Token: 1}}
	fn := func(old fence.Record) ([]byte, error) { return old.Value, nil }
	b.Run("loop", func(b *testing.B) {
		for b.Loop() {
			if err := fence.RunUpdate(b.Context(), r, "k", 1, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inline", func(b *testing.B) {
		for b.Loop() {
			if err := inlineUpdate(b.Context(), r, "k", 1, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

//go:noinline
func inlineUpdate(ctx context.Context, r *noopRounds, key string, token fence.Token, fn fence.UpdateFunc) error {
	if err := fence.CheckUpdate(ctx, key, token, fn); err != nil {
		return err
	}
	for range fence.UpdateAttempts {
		old, read, err := r.ClaimRead(ctx, key, token)
		if err != nil && !errors.Is(err, fence.ErrNotFound) {
			return err
		}
		v, err := fn(old)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.WriteIf(ctx, key, token, read, v); !errors.Is(err, fence.ErrChanged) {
			return err
		}
	}
	return fence.ErrConflict
}
