package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary act as worker A when the demo starts it.
func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		if err := run(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDemo runs the whole demo: with fencing the stale write is refused,
// without it the stale write lands.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	err := demo(&out)
	got := out.String()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, got)
	}
	for _, want := range []string{"REFUSES A's write", "ACCEPTS A's stale write", "LOST UPDATE"} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q:\n%s", want, got)
		}
	}
}
