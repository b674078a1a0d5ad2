package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/etcdlock"
)

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json] [NAME...]",
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

--json prints one object: {"locks": [QUEUE...], "elections": [QUEUE...],
"semaphores": [QUEUE...]}, where QUEUE is {"name", "rev", "holder": ENTRY or
null (the first holder), "holders": [ENTRY...] (every holder: readers
sharing a lock, a semaphore's permits), "waiters": [ENTRY...]}, a
semaphore's also "permits" (its number of permits), and ENTRY is {"key",
"token", "rev", "lease" (hex), "ttl_seconds" (-1: lease gone or none),
"owner" ("" when unknown), "acquired" (RFC 3339, by the writer's clock: when
it joined the queue, as QUEUED), "data", "shared" (true for a reader),
"slot" (a semaphore permit's slot; -1 for the rest, and for a semaphore
holder yet to claim one)}. A semaphore holder's "token" is its slot's token
and "key" its queue key. It also has "groups": [GROUP...], GROUP being
{"name", "rev", "partitions", "moves", "members": [ENTRY...], "others":
[ENTRY...] (members giving another number of partitions), "owners":
[{"partition", "owner": ENTRY or null, "waiters": [ENTRY...], "assigned"
(the key of the member the share gives it to)}...]}.`,
		Example: `  fencelock status
  fencelock status --json nightly-report | jq '.locks[0].holder.token'
  fencelock status --json workers | jq '.semaphores[0].holders[] | {slot, token, owner}'
  fencelock status --json orders | jq '.groups[0].owners[] | {partition, token: .owner.token}'`,
		Args: func(cmd *cobra.Command, names []string) error {
			for _, n := range names {
				if err := validName(cmd, n); err != nil {
					return err
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, names []string) error {
			return status(cmd.Context(), g, names, asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, for scripts")
	return cmd
}

type statusJSON struct {
	Locks      []queueJSON `json:"locks"`
	Elections  []queueJSON `json:"elections"`
	Semaphores []queueJSON `json:"semaphores"`
	Groups     []groupJSON `json:"groups"`
}

type groupJSON struct {
	Name       string          `json:"name"`
	Rev        int64           `json:"rev"`
	Partitions int             `json:"partitions"`
	Moves      int             `json:"moves"`
	Members    []entryJSON     `json:"members"`
	Others     []entryJSON     `json:"others"` // members giving another number of partitions
	Owners     []partitionJSON `json:"owners"`
}

type partitionJSON struct {
	Partition int         `json:"partition"`
	Owner     *entryJSON  `json:"owner"`
	Waiters   []entryJSON `json:"waiters"`
	Assigned  string      `json:"assigned"`
}

func groupToJSON(st etcdlock.GroupStatus) groupJSON {
	j := groupJSON{Name: st.Name, Rev: st.Rev, Partitions: st.Partitions, Moves: st.Moves, Members: []entryJSON{}, Others: []entryJSON{}, Owners: []partitionJSON{}}
	for _, m := range st.Members {
		j.Members = append(j.Members, entryToJSON(m))
	}
	for _, m := range st.Others {
		j.Others = append(j.Others, entryToJSON(m))
	}
	for _, p := range st.Owners {
		pj := partitionJSON{Partition: p.Partition, Waiters: []entryJSON{}, Assigned: p.Assigned}
		if p.Owner != nil {
			o := entryToJSON(*p.Owner)
			pj.Owner = &o
		}
		for _, w := range p.Waiters {
			pj.Waiters = append(pj.Waiters, entryToJSON(w))
		}
		j.Owners = append(j.Owners, pj)
	}
	return j
}

type queueJSON struct {
	Name    string      `json:"name"`
	Rev     int64       `json:"rev"`
	Permits int         `json:"permits,omitempty"` // a semaphore's
	Holder  *entryJSON  `json:"holder"`
	Holders []entryJSON `json:"holders"`
	Waiters []entryJSON `json:"waiters"`
}

type entryJSON struct {
	Key        string    `json:"key"`
	Token      int64     `json:"token"`
	Rev        int64     `json:"rev"`
	Lease      string    `json:"lease"`
	TTLSeconds int64     `json:"ttl_seconds"`
	Owner      string    `json:"owner"`
	Acquired   time.Time `json:"acquired"`
	Data       string    `json:"data"`
	Shared     bool      `json:"shared"`
	Slot       int       `json:"slot"`
}

func toJSON(q etcdlock.Queue) queueJSON {
	j := queueJSON{Name: q.Name, Rev: q.Rev, Holders: []entryJSON{}, Waiters: []entryJSON{}}
	if q.Holder != nil {
		h := entryToJSON(*q.Holder)
		j.Holder = &h
	}
	for _, h := range q.Holders {
		j.Holders = append(j.Holders, entryToJSON(h))
	}
	for _, w := range q.Waiters {
		j.Waiters = append(j.Waiters, entryToJSON(w))
	}
	return j
}

func entryToJSON(e etcdlock.Entry) entryJSON {
	ttl := int64(-1)
	if e.TTL >= 0 {
		ttl = int64(e.TTL / time.Second)
	}
	return entryJSON{Key: e.Key, Token: int64(e.Token), Rev: e.Rev, Lease: fmt.Sprintf("%016x", int64(e.Lease)),
		TTLSeconds: ttl, Owner: e.Owner, Acquired: e.Acquired, Data: e.Data, Shared: e.Shared, Slot: e.Slot}
}

// queues are the queues status shows.
type queues struct {
	locks, elections []etcdlock.Queue
	semaphores       []etcdlock.SemaphoreQueue
	groups           []etcdlock.GroupStatus
}

func status(ctx context.Context, g *globals, names []string, asJSON bool, out io.Writer) error {
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	qs, err := readQueues(ctx, locks, names)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		qs = dropEmpty(qs)
	}
	if asJSON {
		return printJSON(out, qs)
	}
	return printStatus(out, qs)
}

// readQueues reads the queues of names, or of every lock, election and
// semaphore that has someone in it when names is empty.
func readQueues(ctx context.Context, locks *etcdlock.Client, names []string) (queues, error) {
	var qs queues
	lists := [4][]string{names, names, names, names}
	if len(names) == 0 {
		for i, list := range []func(context.Context) ([]string, error){locks.ListLocks, locks.ListElections, locks.ListSemaphores, locks.ListGroups} {
			var err error
			if lists[i], err = list(ctx); err != nil {
				return qs, fail(exitUnavailable, "%v", err)
			}
		}
	}
	for i, kind := range []*[]etcdlock.Queue{&qs.locks, &qs.elections} {
		for _, name := range lists[i] {
			q, err := inspect(ctx, locks, name, i == 1)
			if err != nil {
				return qs, err
			}
			*kind = append(*kind, q)
		}
	}
	for _, name := range lists[2] {
		sq, err := locks.InspectSemaphore(ctx, name)
		if err != nil {
			return qs, inspectFailed(err)
		}
		qs.semaphores = append(qs.semaphores, sq)
	}
	for _, name := range lists[3] {
		st, err := locks.InspectGroup(ctx, name)
		if err != nil {
			return qs, inspectFailed(err)
		}
		qs.groups = append(qs.groups, st)
	}
	return qs, nil
}

func printJSON(out io.Writer, qs queues) error {
	res := statusJSON{Locks: []queueJSON{}, Elections: []queueJSON{}, Semaphores: []queueJSON{}, Groups: []groupJSON{}}
	for _, st := range qs.groups {
		res.Groups = append(res.Groups, groupToJSON(st))
	}
	for _, q := range qs.locks {
		res.Locks = append(res.Locks, toJSON(q))
	}
	for _, q := range qs.elections {
		res.Elections = append(res.Elections, toJSON(q))
	}
	for _, sq := range qs.semaphores {
		j := toJSON(sq.Queue)
		j.Permits = sq.Permits
		res.Semaphores = append(res.Semaphores, j)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// dropEmpty keeps, of the queues of NAMEs given on the command line, the
// ones that have someone in them, and the lock of a NAME that has no one
// in any queue, to show it free: a NAME is a lock's, an election's or a
// semaphore's, and the empty queues of the other kinds are noise.
func dropEmpty(qs queues) queues {
	used := map[string]bool{}
	kept := queues{}
	for _, q := range qs.elections {
		if !empty(q) {
			used[q.Name] = true
			kept.elections = append(kept.elections, q)
		}
	}
	for _, sq := range qs.semaphores {
		if !empty(sq.Queue) {
			used[sq.Name] = true
			kept.semaphores = append(kept.semaphores, sq)
		}
	}
	for _, st := range qs.groups {
		if len(st.Members) > 0 || len(st.Others) > 0 || st.Partitions > 0 && slices.ContainsFunc(st.Owners, func(p etcdlock.PartitionStatus) bool { return p.Owner != nil }) {
			used[st.Name] = true
			kept.groups = append(kept.groups, st)
		}
	}
	for _, q := range qs.locks {
		if !empty(q) || !used[q.Name] {
			kept.locks = append(kept.locks, q)
		}
	}
	return kept
}

func empty(q etcdlock.Queue) bool { return q.Holder == nil && len(q.Waiters) == 0 }

func inspect(ctx context.Context, locks *etcdlock.Client, name string, election bool) (etcdlock.Queue, error) {
	var q etcdlock.Queue
	var err error
	if election {
		q, err = locks.InspectElection(ctx, name)
	} else {
		q, err = locks.Inspect(ctx, name)
	}
	if err != nil {
		return q, inspectFailed(err)
	}
	return q, nil
}

// inspectFailed is the exit for a failed read of a queue.
func inspectFailed(err error) error {
	if errors.Is(err, etcdlock.ErrInvalidName) {
		return bad("%v", err)
	}
	return fail(exitUnavailable, "%v", err)
}

func printStatus(out io.Writer, qs queues) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tROLE\tTOKEN\tOWNER\tQUEUED\tTTL\tLEASE\tDATA")
	for _, q := range qs.locks {
		printQueue(tw, "lock", q, lockRole)
	}
	for _, q := range qs.elections {
		printQueue(tw, "election", q, electionRole)
	}
	for _, sq := range qs.semaphores {
		printQueue(tw, "semaphore", sq.Queue, semaphoreRole)
	}
	for _, st := range qs.groups {
		printGroup(tw, st)
	}
	return tw.Flush()
}

// printGroup prints a group's share, its members, and each partition's
// owner and waiters.
func printGroup(w io.Writer, st etcdlock.GroupStatus) {
	fmt.Fprintf(w, "group\t%s\tshare\t-\t-\t-\t-\t-\t%q\n", st.Name,
		fmt.Sprintf("%d partitions, %d members, %d moves pending", st.Partitions, len(st.Members), st.Moves))
	for _, m := range st.Members {
		printEntry(w, "group", st.Name, "member", m)
	}
	for _, m := range st.Others {
		printEntry(w, "group", st.Name, "member-other-n", m)
	}
	for _, p := range st.Owners {
		if p.Owner != nil {
			printEntry(w, "group", st.Name, fmt.Sprintf("p-%d", p.Partition), *p.Owner)
		} else {
			fmt.Fprintf(w, "group\t%s\tp-%d-free\t-\t-\t-\t-\t-\t-\n", st.Name, p.Partition)
		}
		for _, e := range p.Waiters {
			printEntry(w, "group", st.Name, fmt.Sprintf("p-%d-waiter", p.Partition), e)
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
