package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// deliver sends effects, each resource's in order and resources at once,
// and returns what to settle; lost is the guard's error when the lock was
// lost or its deadline passed, after which nothing more was sent.
func (r *run) deliver(ctx context.Context, effects []Effect) (done []Settled, lost error) {
	runs := byResource(effects)
	var (
		mu  sync.Mutex // guards done and lost
		wg  sync.WaitGroup
		sem = make(chan struct{}, r.d.o.concurrency)
	)
	done = []Settled{}
	for _, run := range runs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := r.deliverRun(ctx, run)
			mu.Lock()
			defer mu.Unlock()
			done = append(done, out...)
			if err != nil && lost == nil {
				lost = err
			}
		}()
	}
	wg.Wait()
	return done, lost
}

// byResource splits effects into runs of one resource each, in order.
func byResource(effects []Effect) [][]Effect {
	at := map[string]int{}
	var runs [][]Effect
	for _, e := range effects {
		i, ok := at[e.Resource]
		if !ok {
			i = len(runs)
			at[e.Resource] = i
			runs = append(runs, nil)
		}
		runs[i] = append(runs[i], e)
	}
	return runs
}

// deliverRun sends one resource's effects in order, stopping at the first
// that is to be retried.
func (r *run) deliverRun(ctx context.Context, run []Effect) ([]Settled, error) {
	var out []Settled
	for _, e := range run {
		if err := r.g.Check(); err != nil {
			return out, err
		}
		if ctx.Err() != nil {
			return out, nil
		}
		attempts := r.attempted(e) + 1
		err := r.send(ctx, e, attempts)
		switch r.verdict(err, attempts) {
		case outDelivered:
			out = append(out, Settled{Effect: e, Attempts: attempts})
			r.forget(e)
		case outParked:
			reason := err.Error()
			if !IsPermanent(err) {
				reason = fmt.Sprintf("after %d attempts: %v", attempts, err)
			}
			out = append(out, Settled{Effect: e, Parked: reason, Attempts: attempts})
			r.forget(e)
			r.report(e, fmt.Errorf("%w: %s: %s", ErrParked, e.Key(), reason))
		default:
			r.failed(e, attempts)
			r.report(e, err)
			return out, nil
		}
	}
	return out, nil
}

// send makes delivery attempt number attempts of e, with its timeout,
// span and metrics; a sender's panic is a permanent error.
func (r *run) send(ctx context.Context, e Effect, attempts int) (err error) {
	ctx, cancel := context.WithTimeout(ctx, r.d.o.sendTimeout)
	defer cancel()
	ctx, span := r.d.tel.startSend(ctx, e)
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("outbox: effect %s: sender panicked: %v", e.Key(), p))
		}
		r.d.tel.endSend(ctx, span, r.verdict(err, attempts), start, err)
	}()
	return r.d.sender.Send(ctx, e)
}

// verdict is what attempt number attempts, ending in err, makes of its
// effect: delivered, parked or to be retried. The one rule, for the
// dispatcher and its metrics alike.
func (r *run) verdict(err error, attempts int) string {
	switch {
	case err == nil:
		return outDelivered
	case IsPermanent(err) || attempts >= r.d.o.maxAttempts:
		return outParked
	}
	return outRetry
}

// attempted returns how many times e failed before, in this run.
func (r *run) attempted(e Effect) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.retry[e.Resource]; w != nil && w.key == e.Key() {
		return w.attempts
	}
	return 0
}

// failed records e's failed attempt and when to try it again.
func (r *run) failed(e Effect, attempts int) {
	d := r.d.o.minBackoff
	for i := 1; i < attempts && d < r.d.o.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.d.o.maxBackoff)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retry[e.Resource] = &retry{key: e.Key(), attempts: attempts, next: time.Now().Add(jitter(d))}
}

func (r *run) forget(e Effect) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.retry, e.Resource)
}
