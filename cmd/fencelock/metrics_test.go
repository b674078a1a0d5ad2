package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// fencelock run --metrics-addr serves the lock's metrics for Prometheus
// while the command runs.
func TestRunServesMetrics(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	started, release := tempFile(t, "started"), tempFile(t, "release")
	cmd := fencelock(t, nil, "--metrics-addr", addr, "run", "observed", "--", "sh", "-c",
		`echo up > `+started+`; while [ ! -e `+release+` ]; do sleep 0.02; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started, 10*time.Second)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`fencelock_lock_acquisitions_total{fencelock_kind="lock"`,
		`fencelock_lock_holders{fencelock_kind="lock"`,
		`fencelock_lock_wait_duration_seconds_bucket{fencelock_kind="lock",fencelock_outcome="acquired"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	os.WriteFile(release, []byte("x"), 0o644)
	if code := waitExit(t, cmd, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
