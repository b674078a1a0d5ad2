package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/examples/internal/redisproc"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestMain lets the test binary act as a holder process when the lesson
// starts one.
func TestMain(m *testing.M) {
	if os.Getenv(envHolder) != "" {
		if err := run(os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestLesson plays the lesson against a real redis-server and checks each
// claim of its story from what happened: every naive lock is the control of
// its fix.
func TestLesson(t *testing.T) {
	var out bytes.Buffer
	r, err := lesson(&out)
	if errors.Is(err, redisproc.ErrUnavailable) {
		testenv.NoServer(t, err, redisproc.ErrUnavailable, redisproc.HowToEnable)
	}
	if err != nil {
		t.Fatalf("lesson: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"GET-then-SET: both clients held the lock in some round", r.race.naiveBoth > 0, r.race.naiveBoth},
		{"SET NX: never both", r.race.fixedBoth == 0, r.race.fixedBoth},
		{"SET NX: exactly one every round", r.race.fixedOne == raceRounds, r.race.fixedOne},
		{"no TTL: the dead holder's key has no expiry", r.expiry.naivePTTL == -1, r.expiry.naivePTTL},
		{"no TTL: B never got the lock", !r.expiry.naiveTaken, r.expiry.naiveTaken},
		{"TTL: B got it, not before the TTL ran out", r.expiry.fixedWait > expiryTTL/2, r.expiry.fixedWait},
		{"DEL: C got the lock while B held it", r.release.naiveStolen, r.release.naiveStolen},
		{"compare-and-delete: C refused", !r.release.fixedStolen, r.release.fixedStolen},
		{"compare-and-delete: A's release deleted nothing", !r.release.fixedReleased, r.release.fixedReleased},
		{"paused holder: A's late write is the final value", strings.HasPrefix(r.paused.final, "A:"), r.paused.final},
		{"paused holder: A's release found B's value", r.paused.result == "released=false", r.paused.result},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.name, c.got)
		}
	}
	for _, want := range []string{"LOST UPDATE", "go run ./cmd/fencedemo"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("story lacks %q", want)
		}
	}
}
