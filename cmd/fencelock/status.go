package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/etcdlock"
)

func newStatusCmd(g *globals) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status [--json] [--watch] [--name-prefix] [NAME...]",
		Short: "Show who holds each lock and semaphore, leads each election and owns each group's partitions, and who waits",
		Long: `status shows, for each lock NAME (all locks with a holder or a waiter when no
NAME is given), the holders and the waiters in the order they will be served,
and the same for semaphores (holders of permits, waiters) and elections
(leader and candidates): owner, fencing token, how long ago it joined the
queue (QUEUED), lease and its remaining TTL, metadata. A NAME with no lock
holder, no semaphore holder and no candidate shows as a free lock.

ROLE is, for a lock: holder (a writer, or run without --read), reader (one
of the readers holding it together, run --read), waiter, read-waiter (a
reader waiting); for a semaphore: slot-I (the holder of the permit of slot
I, whose TOKEN is that slot's token, FENCELOCK_TOKEN of its run), holder (a
holder yet to claim its slot), waiter; for an election: leader, candidate.

For a group (etcdlock's Group): a row "share" whose DATA gives its number
of partitions and members and the moves its share still asks for (0 once it
has settled), a row "member" per worker ("member-other-n" for one that gives the group
another number of partitions: it is left out of the share and its Join
fails), and a row "p-K" for the owner of partition K (TOKEN: the
partition's token; DATA: the key of the member it belongs to), "p-K-free"
for a partition no one owns, "p-K-waiter" for a worker waiting to take it
over.

QUEUED counts from when the key was written, by the writer's clock: for a
holder or leader that waited behind another, that is earlier than when it
began to hold or lead, which etcd does not record.

--json prints one object, a member per kind of name, in this order:
{"locks": [QUEUE...], "elections": [QUEUE...], "semaphores": [QUEUE...],
"groups": [GROUP...]}, where QUEUE is {"name", "rev", "holder": ENTRY or
null (the first holder), "holders": [ENTRY...] (every holder: readers
sharing a lock, a semaphore's permits), "waiters": [ENTRY...]}, a
semaphore's also "permits" (its number of permits), and ENTRY is {"key",
"token", "rev", "lease" (hex), "ttl_seconds" (-1: lease gone or none),
"owner" ("" when unknown), "acquired" (RFC 3339, by the writer's clock: when
it joined the queue, as QUEUED), "data", "shared" (true for a reader),
"slot" (a semaphore permit's slot; -1 for the rest, and for a semaphore
holder yet to claim one)}. A semaphore holder's "token" is its slot's token
and "key" its queue key. GROUP is {"name", "rev", "partitions", "moves", "members": [ENTRY...], "others":
[ENTRY...] (members giving another number of partitions), "owners":
[{"partition", "owner": ENTRY or null, "waiters": [ENTRY...], "assigned"
(the key of the member the share gives it to)}...]}.

--name-prefix makes each NAME a prefix of names, as etcdctl's --prefix makes
a key one: status shows every lock, election, semaphore and group whose
name begins with one of them (fencelock's own --prefix is the prefix of the
keys).

--watch (-w) follows the queues as they change, until interrupted (Ctrl-C,
SIGTERM: exit status 0). It reads the keys once, at one revision, then
follows them with an etcd watch from the next revision and rebuilds the
view from its own copy of the keys: neither a change nor a redraw sends a
request, but for one per lease when it first appears, for its TTL. etcd's
watch does not see keep-alives, so the column TTL becomes GRANTED-TTL: the
lease's granted TTL, as that one request read it (ttl_seconds, in JSON),
not the time it has left, which only a request per refresh could tell; a
lease that expires deletes its keys, and the view shows that. On a
terminal it shows a full screen, its header giving the endpoints, the
time and the watch's revision, redrawn on each change and each second
(the QUEUED ages count on locally); otherwise it prints the table, after
a line "--- TIME rev REV", each time the queues change, and nothing in
between; with --json, one line of JSON per change: the object above with
"time", "rev", and "error" when the watch was interrupted. When it is
(etcd compacted the revisions it needed, the connection dropped), the
view says "reconnecting" and why, reads the keys afresh and watches
again from there.`,
		Example: `  fencelock status
  fencelock status --json nightly-report | jq '.locks[0].holder.token'
  fencelock status --json workers | jq '.semaphores[0].holders[] | {slot, token, owner}'
  fencelock status --json orders | jq '.groups[0].owners[] | {partition, token: .owner.token}'
  fencelock status --watch nightly-report
  fencelock status -w --name-prefix tenant/42/
  fencelock status --watch --json | jq -c '{rev, holders: [.locks[].holder.owner]}'`,
		Args: func(cmd *cobra.Command, names []string) error {
			for _, n := range names {
				if err := validName(cmd, n); err != nil {
					return err
				}
			}
			if o.prefix && len(names) == 0 {
				return bad("status: --name-prefix needs a NAME to take as a prefix (to see every name, give none, without --name-prefix)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, names []string) error {
			scope := etcdlock.StatusScope{Names: names, Prefix: o.prefix}
			if o.watch {
				return watchCmd(cmd.Context(), g, scope, o.asJSON, cmd.OutOrStdout())
			}
			return status(cmd.Context(), g, scope, o.asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON, for scripts")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "follow the queues as they change, with an etcd watch, until interrupted")
	cmd.Flags().BoolVar(&o.prefix, "name-prefix", false, "take each NAME as a prefix of names (as etcdctl's --prefix does keys)")
	return cmd
}

// statusOptions are status's flags.
type statusOptions struct {
	asJSON, watch, prefix bool
}

func status(ctx context.Context, g *globals, scope etcdlock.StatusScope, asJSON bool, out io.Writer) error {
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := locks.Status(ctx, scope)
	if err != nil {
		return inspectFailed(err)
	}
	secs := st.Sections
	if exact(scope) {
		secs = dropEmpty(secs)
	}
	if asJSON {
		return printJSON(out, secs)
	}
	return printStatus(out, secs)
}

// exact reports whether scope names its names exactly (and so shows a
// NAME's free lock: see dropEmpty).
func exact(scope etcdlock.StatusScope) bool { return len(scope.Names) > 0 && !scope.Prefix }

// freeKind is the kind whose section shows a NAME that no kind has anyone
// in: as a free lock.
const freeKind = "lock"

// dropEmpty keeps, of the sections of NAMEs given on the command line, the
// names that have someone in them, and the lock of a NAME that has no one
// in any section, to show it free: a NAME may be of any kind, and the
// empty names of the other kinds are noise.
func dropEmpty(secs []etcdlock.Section) []etcdlock.Section {
	used := map[string]bool{}
	for _, sec := range secs {
		for _, n := range sec.Names {
			used[n.Name] = used[n.Name] || !n.Value.Empty()
		}
	}
	kept := make([]etcdlock.Section, len(secs))
	for i, sec := range secs {
		kept[i].Kind = sec.Kind
		for _, n := range sec.Names {
			if !n.Value.Empty() || sec.Kind == freeKind && !used[n.Name] {
				kept[i].Names = append(kept[i].Names, n)
			}
		}
	}
	return kept
}

// inspectFailed is the exit for a failed read of a queue.
func inspectFailed(err error) error {
	if errors.Is(err, etcdlock.ErrInvalidName) {
		return bad("%v", err)
	}
	return fail(exitUnavailable, "%v", err)
}

func printStatus(out io.Writer, secs []etcdlock.Section) error { return printTable(out, secs, "TTL") }

// printTable prints secs as a table, titling the lease TTL's column
// ttlTitle. A kind this command does not know shows as a lock does: its
// values are queues.
func printTable(out io.Writer, secs []etcdlock.Section, ttlTitle string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KIND\tNAME\tROLE\tTOKEN\tOWNER\tQUEUED\t%s\tLEASE\tDATA\n", ttlTitle)
	for _, sec := range secs {
		for _, n := range sec.Names {
			switch v := n.Value.(type) {
			case etcdlock.Queue:
				printQueue(tw, sec.Kind, v, roleOf(sec.Kind))
			case etcdlock.SemaphoreQueue:
				printQueue(tw, sec.Kind, v.Queue, semaphoreRole)
			case etcdlock.GroupStatus:
				printGroup(tw, sec.Kind, v)
			}
		}
	}
	return tw.Flush()
}

// roleOf is how the ROLE column names the entries of a queue of kind: an
// election's as leader and candidates, any other's as a lock's.
func roleOf(kind string) func(e etcdlock.Entry, holds bool) string {
	if kind == "election" {
		return electionRole
	}
	return lockRole
}

// printGroup prints a group's share, its members, and each partition's
// owner and waiters.
func printGroup(w io.Writer, kind string, st etcdlock.GroupStatus) {
	fmt.Fprintf(w, "%s\t%s\tshare\t-\t-\t-\t-\t-\t%q\n", kind, st.Name,
		fmt.Sprintf("%d partitions, %d members, %d moves pending", st.Partitions, len(st.Members), st.Moves))
	for _, m := range st.Members {
		printEntry(w, kind, st.Name, "member", m)
	}
	for _, m := range st.Others {
		printEntry(w, kind, st.Name, "member-other-n", m)
	}
	for _, p := range st.Owners {
		if p.Owner != nil {
			printEntry(w, kind, st.Name, fmt.Sprintf("p-%d", p.Partition), *p.Owner)
		} else {
			fmt.Fprintf(w, "%s\t%s\tp-%d-free\t-\t-\t-\t-\t-\t-\n", kind, st.Name, p.Partition)
		}
		for _, e := range p.Waiters {
			printEntry(w, kind, st.Name, fmt.Sprintf("p-%d-waiter", p.Partition), e)
		}
	}
}

// printQueue prints q's holders and waiters, role naming each.
func printQueue(w io.Writer, kind string, q etcdlock.Queue, role func(e etcdlock.Entry, holds bool) string) {
	if q.Holder == nil {
		fmt.Fprintf(w, "%s\t%s\tfree\t-\t-\t-\t-\t-\t-\n", kind, q.Name)
		return
	}
	for _, h := range q.Holders {
		printEntry(w, kind, q.Name, role(h, true), h)
	}
	for _, e := range q.Waiters {
		printEntry(w, kind, q.Name, role(e, false), e)
	}
}

func lockRole(e etcdlock.Entry, holds bool) string {
	switch {
	case holds && e.Shared:
		return "reader"
	case holds:
		return "holder"
	case e.Shared:
		return "read-waiter"
	}
	return "waiter"
}

func electionRole(_ etcdlock.Entry, holds bool) string {
	if holds {
		return "leader"
	}
	return "candidate"
}

func semaphoreRole(e etcdlock.Entry, holds bool) string {
	switch {
	case holds && e.Slot >= 0:
		return fmt.Sprintf("slot-%d", e.Slot)
	case holds:
		return "holder"
	}
	return "waiter"
}

func printEntry(w io.Writer, kind, name, role string, e etcdlock.Entry) {
	queued, ttl, data := "-", "-", "-"
	if !e.Acquired.IsZero() {
		queued = time.Since(e.Acquired).Round(time.Second).String() + " ago"
	}
	if e.TTL >= 0 {
		ttl = e.TTL.String()
	}
	if e.Data != "" {
		data = fmt.Sprintf("%q", e.Data)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%016x\t%s\n", kind, name, role, e.Token, e.OwnerOrUnknown(), queued, ttl, int64(e.Lease), data)
}
