package etcdlock

import (
	"context"
	"testing"

	"github.com/fencelock/fencelock/internal/testkit/oteltest"
)

// BenchmarkTelemetryCalls is the telemetry's own cost in one uncontended
// Lock+Unlock, without etcd: the calls acquire, Unlock and the lock's end
// make (acquireStart and its end, releaseStart and its end, lockEnded), on the
// global providers with no SDK installed (the default: what every user
// pays), on the SDK with metrics to a reader and every span recorded and
// kept in memory (as the tests read them), and on the SDK with every span
// recorded and exported through a batch processor (as an application
// installs it; the exporter drops them).
func BenchmarkTelemetryCalls(b *testing.B) {
	for _, sdk := range []string{"nosdk", "sdk", "sdk-exported"} {
		b.Run(sdk, func(b *testing.B) {
			o := defaultOptions()
			switch sdk {
			case "sdk":
				s := oteltest.New(b)
				o.meterProvider, o.tracerProvider = s.Meters, s.Tracers
			case "sdk-exported":
				s := oteltest.NewExported(b)
				o.meterProvider, o.tracerProvider = s.Meters, s.Tracers
			}
			tel, err := newTelemetry(&o)
			if err != nil {
				b.Fatal(err)
			}
			c := &Client{o: o, tel: tel}
			sp := spot{name: "job", wait: true, kind: kindLock}
			l := &Lock{c: c, s: &session{id: 0x694d9a5c3b1e2f07}, t: &ticket{spot: sp}, token: 42}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				benchLockUnlock(ctx, tel, sp, l)
			}
		})
	}
}

// benchLockUnlock makes the telemetry calls of one Lock+Unlock, as the
// engine makes them (acquire, newLock, Unlock, end).
func benchLockUnlock(ctx context.Context, tel *telemetry, sp spot, l *Lock) {
	actx, o := tel.acquireStart(ctx, acquireStartEvent{kind: sp.kind, name: sp.name, wait: sp.wait})
	l.acquired = tel.holdStart() // as newLock does
	tel.acquireEnd(actx, o, acquireEndEvent{kind: sp.kind, name: sp.name, token: l.token, lease: l.s.id})
	_, r := tel.releaseStart(ctx, l.event())
	tel.releaseEnd(r, releaseEndEvent{})
	tel.lockEnded(lockEndEvent{lockEvent: l.event(), acquired: l.acquired, cause: ErrUnlocked, owner: l.c.o.owner})
}
