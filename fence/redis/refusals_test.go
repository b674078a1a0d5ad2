package redisfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// busy keeps the server busy running a script for d.
func busy(t *testing.T, d time.Duration) chan error {
	c := client(t)
	done := make(chan error, 1)
	go func() {
		done <- c.Do(context.Background(), "eval", `local t = redis.call('TIME'); local s = t[1]*1000000 + t[2]
while true do local n = redis.call('TIME'); if n[1]*1000000 + n[2] - s > tonumber(ARGV[1]) then break end end
return 1`, 0, d.Microseconds()).Err()
	}()
	time.Sleep(50 * time.Millisecond)
	return done
}

// Under OOM (maxmemory reached, noeviction) every script is refused
// before it writes, and says so.
func TestReviewOOM(t *testing.T) {
	admin := client(t)
	p := prefix(t)
	s, h := mustNew(t, admin, p), mustHash(t, admin)
	mustPut(t, s, "k", 5, "five")
	if err := h.Set(t.Context(), p+"h", 5, map[string]string{"v": "five"}); err != nil {
		t.Fatal(err)
	}
	before, _ := admin.HGetAll(t.Context(), s.Key("k")).Result()
	if err := admin.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.ConfigSet(context.Background(), "maxmemory", "0")
	c := client(t)
	s, h = mustNew(t, c, p), mustHash(t, c)
	// (Delete is allowed under OOM: its HDEL frees memory, and Redis lets
	// a script that has written go on.)
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"Put", func() error { return s.Put(t.Context(), "k", 7, []byte("x")) }},
		{"GetForUpdate", func() error { return second(s.GetForUpdate(t.Context(), "k", 7)) }},
		{"Update", func() error {
			return s.Update(t.Context(), "k", 7, func(r fence.Record) ([]byte, error) { return r.Value, nil })
		}},
		{"Hash.Set", func() error { return h.Set(t.Context(), p+"h", 7, map[string]string{"v": "x"}) }},
		{"Hash.Update", func() error {
			return h.Update(t.Context(), p+"h", 7, []string{"v"}, func(m map[string]string) (map[string]string, error) { return m, nil })
		}},
	} {
		err := tc.err()
		t.Logf("%s: %v", tc.name, err)
		if err == nil || errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
			t.Errorf("%s under OOM: %v", tc.name, err)
		}
	}
	admin.ConfigSet(context.Background(), "maxmemory", "0")
	after, _ := admin.HGetAll(t.Context(), s.Key("k")).Result()
	if len(after) != len(before) || after["floor"] != before["floor"] || after["version"] != before["version"] {
		t.Errorf("changed under OOM: %v -> %v", before, after)
	}
}

// BUSY (another script past busy-reply-threshold): refused before ours
// ran, and said so.
func TestReviewBusy(t *testing.T) {
	admin := client(t)
	old, _ := admin.ConfigGet(t.Context(), "busy-reply-threshold").Result()
	if err := admin.ConfigSet(t.Context(), "busy-reply-threshold", "100").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.ConfigSet(context.Background(), "busy-reply-threshold", old["busy-reply-threshold"])
	s := mustNew(t, client(t), prefix(t))
	mustPut(t, s, "k", 5, "five")
	done := busy(t, 600*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	err := s.Put(t.Context(), "k", 7, []byte("seven"))
	<-done
	t.Logf("Put during BUSY: %v", err)
	if err == nil {
		fencewant.Record(t, s, "k", 7, "seven")
		return
	}
	if errors.Is(err, fence.ErrUnknownOutcome) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v", err)
	}
	fencewant.Record(t, s, "k", 5, "five")
}
