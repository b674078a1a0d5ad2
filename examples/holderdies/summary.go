package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/fencelock/fencelock/examples/internal/story"
	"github.com/fencelock/fencelock/fence"
)

// summarize prints the measured waits side by side and what each lock's
// token lets a resource do.
func summarize(out io.Writer, hs []handoff) {
	fmt.Fprintf(out, "\n=== The next holder's wait (TTL %v on both)\n", ttl)
	fmt.Fprintf(out, "  %-18s %-12s %s\n", "", "SIGKILL", "SIGTERM")
	for _, backend := range []string{"redis", "etcd"} {
		fmt.Fprintf(out, "  %-18s %-12s %s\n", title(backend), story.Ms(find(hs, backend, false).wait), story.Ms(find(hs, backend, true).wait))
	}
	fmt.Fprintln(out, "  Killed, both wait out what was left of the lease since its last renewal: etcd is no faster")
	fmt.Fprintln(out, "  (and may be up to 500 ms slower: it looks for expired leases twice a second; the Redis waiter")
	fmt.Fprintln(out, "  polls every 10 ms, and Redis expires the key when it is asked for it).")
	fmt.Fprintln(out, "  Stopped gracefully, both hand over at once: the Redis holder runs its compare-and-delete,")
	fmt.Fprintln(out, "  the etcdlock holder's Close revokes its lease, and the queued waiter is told by its watch.")

	r, e := find(hs, "redis", false), find(hs, "etcd", false)
	fmt.Fprintln(out, "\n=== Which token can a resource fence with?")
	fmt.Fprintf(out, "  Redis: the dead holder's value %s, the next holder's %s. Which is newer? Nothing says.\n", r.old, r.new)
	fmt.Fprintf(out, "  etcd:  the dead holder's token %s, the next holder's %s: it only grows.\n", e.old, e.new)
	if err := fenceLateWrite(e); err != nil {
		fmt.Fprintf(out, "  A resource that has seen %s refuses a late write with %s: %v\n", e.new, e.old, err)
	}
	fmt.Fprintln(out, "  So a holder that was only paused, not dead, cannot overwrite its successor where the resource\n  checks the token: go run ./cmd/fencedemo")
}

// fenceLateWrite plays the etcd tokens of a handoff against a resource
// that checks them: the next holder writes, then the old holder's late
// write. It returns the late write's error (matching fence.ErrStale).
func fenceLateWrite(h handoff) error {
	old, err1 := strconv.ParseInt(h.old, 10, 64)
	cur, err2 := strconv.ParseInt(h.new, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	ctx := context.Background()
	store := fence.NewMemoryStore()
	if err := store.Put(ctx, "report", fence.Token(cur), []byte("next holder")); err != nil {
		return err
	}
	return store.Put(ctx, "report", fence.Token(old), []byte("late write"))
}

// find returns the handoff of backend stopped that way.
func find(hs []handoff, backend string, graceful bool) handoff {
	for _, h := range hs {
		if h.backend == backend && h.graceful == graceful {
			return h
		}
	}
	return handoff{}
}
