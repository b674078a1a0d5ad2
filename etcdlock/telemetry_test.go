package etcdlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/internal/testkit/oteltest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// instrumented is a Client's telemetry, read back in memory.
type instrumented struct {
	*oteltest.SDK
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// text returns what was written.
func (s *syncBuffer) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func withTelemetry(t *testing.T) (*instrumented, []etcdlock.Option) {
	in := &instrumented{SDK: oteltest.New(t), logs: &syncBuffer{}}
	log := slog.New(slog.NewJSONHandler(in.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return in, []etcdlock.Option{etcdlock.WithMeterProvider(in.Meters), etcdlock.WithTracerProvider(in.Tracers), etcdlock.WithLogger(log)}
}

var (
	kindLock     = attribute.String("fencelock.kind", "lock")
	kindElection = attribute.String("fencelock.kind", "election")
)

func outcome(o string) attribute.KeyValue { return attribute.String("fencelock.outcome", o) }
func cause(c string) attribute.KeyValue   { return attribute.String("fencelock.cause", c) }

func TestTelemetryLockPaths(t *testing.T) {
	in, opts := withTelemetry(t)
	cli := etcdClient(t)
	c := newLocker(t, cli, opts...)
	other := newLocker(t, cli)

	l := mustLock(t, c, "job")
	if got := in.Sum(t, "fencelock.lock.holders", kindLock); got != 1 {
		t.Fatalf("holders while held: got %d, want 1", got)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	held := mustLock(t, other, "busy")
	defer held.Unlock(t.Context())
	if _, err := c.TryLock(t.Context(), "busy"); err == nil {
		t.Fatal("TryLock of a held lock succeeded")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(ctx, "busy"); err == nil {
		t.Fatal("Lock of a held lock succeeded")
	}

	for _, tt := range []struct {
		name string
		want int64
		attr []attribute.KeyValue
	}{
		{"fencelock.lock.wait.duration", 1, []attribute.KeyValue{kindLock, outcome("acquired")}},
		{"fencelock.lock.wait.duration", 1, []attribute.KeyValue{kindLock, outcome("locked")}},
		{"fencelock.lock.wait.duration", 1, []attribute.KeyValue{kindLock, outcome("timeout")}},
		{"fencelock.lock.acquisitions", 1, []attribute.KeyValue{kindLock}},
		{"fencelock.lock.hold.duration", 1, []attribute.KeyValue{kindLock}},
		{"fencelock.lock.holders", 0, []attribute.KeyValue{kindLock}},
		{"fencelock.lock.waiters", 0, []attribute.KeyValue{kindLock}},
		{"fencelock.lock.losses", 0, nil},
	} {
		if got := in.Sum(t, tt.name, tt.attr...); got != tt.want {
			t.Errorf("%s %v: got %d, want %d", tt.name, tt.attr, got, tt.want)
		}
	}
	s := in.Span(t, "etcdlock.Lock")
	if v, ok := oteltest.Attr(s, "fencelock.token"); !ok || v.AsInt64() != int64(l.Token()) {
		t.Errorf("Lock span's token: got %v, want %d", v, l.Token())
	}
	if v, _ := oteltest.Attr(in.Span(t, "etcdlock.Unlock"), "fencelock.token"); v.AsInt64() != int64(l.Token()) {
		t.Errorf("Unlock span's token: got %v, want %d", v, l.Token())
	}
	if v, _ := oteltest.Attr(in.Span(t, "etcdlock.TryLock"), "fencelock.outcome"); v.AsString() != "locked" {
		t.Errorf("TryLock span's outcome: got %v, want locked", v)
	}
}

// Losses by cause, each with a warn log line naming the lock, token, lease
// and cause.
func TestTelemetryLosses(t *testing.T) {
	t.Parallel()
	in, opts := withTelemetry(t)
	cli := etcdClient(t)
	pcli, proxy := proxied(t)
	cut := newLocker(t, pcli, opts...)
	c := newLocker(t, cli, opts...)

	deleted := mustLock(t, c, "deleted")
	if _, err := cli.Delete(t.Context(), deleted.Key()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, deleted.Done(), 2*time.Second, "deleted lock's Done")

	partitioned := mustLock(t, cut, "partitioned")
	proxy.Cut()
	waitClosed(t, partitioned.Done(), 3*time.Second, "partitioned lock's Done")
	proxy.Heal()

	// A loss is counted, then logged, just after Done closes (a session
	// that ends closes all its locks' Done channels first): wait for the
	// second log line.
	poll.Until(t, "the second loss logged", func() bool { return len(lossesLogged(t, in)) >= 2 })
	if got := in.Sum(t, "fencelock.lock.losses", kindLock, cause("key_deleted")); got != 1 {
		t.Errorf("losses by key_deleted: got %d, want 1", got)
	}
	if got := in.Sum(t, "fencelock.lock.losses", kindLock, cause("validity_expired")); got != 1 {
		t.Errorf("losses by validity_expired: got %d, want 1", got)
	}
	if got := in.Sum(t, "fencelock.session.keepalive.duration"); got < 1 {
		t.Errorf("keepalives recorded: got %d, want some", got)
	}
	if got := in.Sum(t, "fencelock.session.validity.margin"); got < 1 {
		t.Errorf("validity margins recorded: got %d, want some", got)
	}
	if warned := lossesLogged(t, in); strings.Join(warned, ",") != "key_deleted,validity_expired" {
		t.Errorf("warn lines for losses: got causes %v, want key_deleted then validity_expired", warned)
	}
}

// lossesLogged returns the causes of the warn lines logged for losses.
func lossesLogged(t *testing.T, in *instrumented) []string {
	t.Helper()
	var warned []string
	for _, l := range in.logs.lines() {
		if l["level"] == "WARN" && l["msg"] == "etcdlock: lost" {
			if l["name"] == nil || l["token"] == nil || l["lease"] == nil || l["cause"] == nil {
				t.Errorf("loss log line lacks name, token, lease or cause: %v", l)
				continue
			}
			warned = append(warned, l["cause"].(string))
		}
	}
	return warned
}

func TestTelemetryElection(t *testing.T) {
	in, opts := withTelemetry(t)
	c := newLocker(t, etcdClient(t), opts...)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seen, err := c.Observe(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		term := mustCampaign(t, c, "e", "v")
		<-seen
		if err := term.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := in.Sum(t, "fencelock.lock.acquisitions", kindElection); got != 2 {
		t.Errorf("terms won: got %d, want 2", got)
	}
	if got := in.Sum(t, "fencelock.lock.hold.duration", kindElection); got != 2 {
		t.Errorf("term durations: got %d, want 2", got)
	}
	if got := in.Sum(t, "fencelock.election.leader.changes"); got != 2 {
		t.Errorf("leader changes observed: got %d, want 2", got)
	}
	in.Span(t, "etcdlock.Campaign")
	in.Span(t, "etcdlock.Resign")
}

// With WithNameAttribute the metrics carry the lock's name; without it
// (the control, on the same SDK) they do not.
func TestTelemetryNameAttribute(t *testing.T) {
	in, opts := withTelemetry(t)
	cli := etcdClient(t)
	named := newLocker(t, cli, append(opts, etcdlock.WithNameAttribute(true))...)
	unnamed := newLocker(t, cli, opts...)
	for _, c := range []*etcdlock.Client{named, unnamed} {
		if err := mustLock(t, c, "job").Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	name := attribute.String("fencelock.name", "job")
	for _, tt := range []struct {
		metric string
		attr   []attribute.KeyValue
		want   int64
	}{
		{"fencelock.lock.acquisitions", []attribute.KeyValue{kindLock, name}, 1},
		{"fencelock.lock.acquisitions", []attribute.KeyValue{kindLock}, 2},
		{"fencelock.lock.wait.duration", []attribute.KeyValue{kindLock, outcome("acquired"), name}, 1},
		{"fencelock.lock.hold.duration", []attribute.KeyValue{kindLock, name}, 1},
		{"fencelock.lock.holders", []attribute.KeyValue{kindLock, name}, 0},
	} {
		if got := in.Sum(t, tt.metric, tt.attr...); got != tt.want {
			t.Errorf("%s %v: got %d, want %d", tt.metric, tt.attr, got, tt.want)
		}
	}
}

// Every histogram in seconds has buckets for seconds: the keepalive and the
// wait of an uncontended lock (a millisecond or so) fall in buckets of
// their own, and waits and holds of minutes are told apart. With
// OpenTelemetry's default boundaries (0, 5, 10, ...), made for
// milliseconds, all of them fell in one bucket.
func TestTelemetryHistogramBucketsForSeconds(t *testing.T) {
	in, opts := withTelemetry(t)
	c := newLocker(t, etcdClient(t), opts...)
	l := mustLock(t, c, "job")
	poll.Until(t, "a keepalive acknowledged", func() bool { return in.Sum(t, "fencelock.session.keepalive.duration") > 0 })
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fencelock.lock.wait.duration", "fencelock.lock.hold.duration",
		"fencelock.session.keepalive.duration", "fencelock.session.validity.margin"} {
		b := in.Bounds(t, name)
		var subSecond int
		for _, v := range b {
			if v > 0 && v <= 1 {
				subSecond++
			}
		}
		if subSecond < 5 || b[len(b)-1] < 300 {
			t.Errorf("%s: bucket boundaries %v, want at least 5 between 0 and 1 s, and one of at least 5 min", name, b)
		}
	}
}

// TestTelemetryGroup checks a group's metrics: partitions owned now,
// handoffs, and the partitions' acquisitions with kind "partition".
func TestTelemetryGroup(t *testing.T) {
	in, opts := withTelemetry(t)
	cli := etcdClient(t)
	c := newLocker(t, cli, opts...)
	runs := newGroupRuns()
	stop := joinGroup(t, group(t, c, "g", 4), runs.work(0))
	g := group(t, newLocker(t, cli), "g", 4)
	groupSettled(t, g, 1, 10*time.Second)
	// The keys show the partitions owned a moment before the worker has
	// counted them (it counts as it starts each work): wait for the count.
	partition := attribute.String("fencelock.kind", "partition")
	poll.Until(t, "the worker's four partitions counted", func() bool {
		return in.Sum(t, "fencelock.group.partitions") >= 4 && in.Sum(t, "fencelock.lock.acquisitions", partition) >= 4
	})
	if got := in.Sum(t, "fencelock.group.partitions"); got != 4 {
		t.Errorf("partitions owned: got %d, want 4", got)
	}
	if got := in.Sum(t, "fencelock.lock.acquisitions", partition); got != 4 {
		t.Errorf("partitions acquired: got %d, want 4", got)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if got := in.Sum(t, "fencelock.group.partitions"); got != 0 {
		t.Errorf("partitions owned after leaving: got %d, want 0", got)
	}
	if got := in.Sum(t, "fencelock.group.handoffs"); got != 4 {
		t.Errorf("handoffs after leaving: got %d, want 4", got)
	}
	in.Span(t, "etcdlock.Join")
	in.Span(t, "etcdlock.Partition")
	in.Span(t, "etcdlock.Handoff")
	in.Span(t, "etcdlock.Leave")
}
