// Command naivelock breaks the lock people first write on Redis, three
// ways, each against a real redis-server it starts: GET-then-SET lets two
// clients hold it at once; without an expiry a killed holder holds it
// forever; a release that does not check whose lock it is deletes the next
// holder's. After each it shows the fix (SET NX, a TTL, a compare-and-delete
// script), and then what the fixed lock still cannot do: a holder paused
// past its TTL writes after the next one (go run ./cmd/fencedemo shows the
// fix for that).
//
//	go -C examples run ./naivelock
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/examples/internal/redisproc"
	"github.com/fencelock/fencelock/examples/internal/story"
)

// envHolder, set to a holderConfig as JSON, makes this executable, re-run
// by the lesson, a lock holder that can be killed or frozen.
const envHolder = "NAIVELOCK_HOLDER"

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "naivelock:", err)
		os.Exit(1)
	}
}

// run is the lesson, or a holder when started as one.
func run(out io.Writer) error {
	if js := os.Getenv(envHolder); js != "" {
		return holder(js, os.Stdin, os.Stdout)
	}
	_, err := lesson(out)
	return err
}

// results is what happened, for the test to check the story's claims.
type results struct {
	race    raceResult
	expiry  expiryResult
	release releaseResult
	paused  pausedResult
}

// lesson starts Redis and plays the four parts, telling them on out.
func lesson(out io.Writer) (results, error) {
	var r results
	dir, err := os.MkdirTemp("", "naivelock-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Fprintln(out, "starting redis-server on a free loopback port...")
	srv, err := redisproc.Start(ctx, dir)
	if err != nil {
		return r, err
	}
	defer srv.Close()
	l := &lessonEnv{out: out, srv: srv}
	if r.race, err = l.race(ctx); err != nil {
		return r, err
	}
	if r.expiry, err = l.expiry(ctx); err != nil {
		return r, err
	}
	if r.release, err = l.release(ctx); err != nil {
		return r, err
	}
	if r.paused, err = l.paused(ctx); err != nil {
		return r, err
	}
	fmt.Fprintln(out, "\nThree bugs, three fixes: SET NX (atomic), PX (a TTL), compare-and-delete (release only your own).")
	fmt.Fprintln(out, "The fixed lock still let a paused holder write after the next one: only the resource can refuse")
	fmt.Fprintln(out, "that write, by checking an ordered token. See it done: go run ./cmd/fencedemo")
	return r, nil
}

// lessonEnv is what every part uses.
type lessonEnv struct {
	out io.Writer
	srv *redisproc.Server
}

// client returns a new client of the lesson's server.
func (l *lessonEnv) client() *redis.Client { return l.srv.Client() }

// part prints a part's heading and returns its timeline.
func (l *lessonEnv) part(n int, title string) *story.Timeline {
	fmt.Fprintf(l.out, "\n=== %d. %s\n", n, title)
	return story.NewTimeline(l.out)
}

// reportTimeout bounds the wait for each of a holder process's reports.
const reportTimeout = 30 * time.Second
