package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencelock/fencelock/etcdlock"
)

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json] [NAME...]",
		Short: "Show who holds each lock and leads each election, and who waits",
		Long: `status shows, for each lock NAME (all locks with a holder or a waiter when no
NAME is given), the holder and the waiters in the order they will be served,
and the same for elections (leader and candidates): owner, fencing token,
how long ago it joined the queue (QUEUED), lease and its remaining TTL,
metadata. A NAME with neither a lock holder nor a candidate shows as free.

QUEUED counts from when the key was written, by the writer's clock: for a
holder or leader that waited behind another, that is earlier than when it
began to hold or lead, which etcd does not record.

--json prints one object: {"locks": [QUEUE...], "elections": [QUEUE...]},
where QUEUE is {"name", "rev", "holder": ENTRY or null, "waiters": [ENTRY...]}
and ENTRY is {"key", "token", "rev", "lease" (hex), "ttl_seconds" (-1: lease
gone or none), "owner" ("" when unknown), "acquired" (RFC 3339, by the
writer's clock: when it joined the queue, as QUEUED), "data"}.`,
		Example: `  fencelock status
  fencelock status --json nightly-report | jq '.locks[0].holder.token'`,
		RunE: func(cmd *cobra.Command, names []string) error {
			return status(cmd.Context(), g, names, asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, for scripts")
	return cmd
}

type statusJSON struct {
	Locks     []queueJSON `json:"locks"`
	Elections []queueJSON `json:"elections"`
}

type queueJSON struct {
	Name    string      `json:"name"`
	Rev     int64       `json:"rev"`
	Holder  *entryJSON  `json:"holder"`
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
}

func toJSON(q etcdlock.Queue) queueJSON {
	j := queueJSON{Name: q.Name, Rev: q.Rev, Waiters: []entryJSON{}}
	if q.Holder != nil {
		h := entryToJSON(*q.Holder)
		j.Holder = &h
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
		TTLSeconds: ttl, Owner: e.Owner, Acquired: e.Acquired, Data: e.Data}
}

func status(ctx context.Context, g *globals, names []string, asJSON bool, out io.Writer) error {
	locks, closeLocks, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lockNames, electionNames := names, names
	if len(names) == 0 {
		if lockNames, err = locks.ListLocks(ctx); err != nil {
			return fail(exitUnavailable, "%v", err)
		}
		if electionNames, err = locks.ListElections(ctx); err != nil {
			return fail(exitUnavailable, "%v", err)
		}
	}
	var rows [2][]etcdlock.Queue
	for i, list := range [][]string{lockNames, electionNames} {
		for _, name := range list {
			q, err := inspect(ctx, locks, name, i == 1)
			if err != nil {
				return err
			}
			rows[i] = append(rows[i], q)
		}
	}
	if len(names) > 0 {
		rows[0], rows[1] = dropEmpty(rows[0], rows[1])
	}
	if asJSON {
		res := statusJSON{Locks: []queueJSON{}, Elections: []queueJSON{}}
		for _, q := range rows[0] {
			res.Locks = append(res.Locks, toJSON(q))
		}
		for _, q := range rows[1] {
			res.Elections = append(res.Elections, toJSON(q))
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return printStatus(out, rows[0], rows[1])
}

// dropEmpty keeps, of the queues of NAMEs given on the command line, the
// ones that have someone in them, and the lock of a NAME that has no one
// in either queue, to show it free: a NAME is a lock's or an election's,
// and the empty queue of the other kind is noise.
func dropEmpty(lockQs, electionQs []etcdlock.Queue) ([]etcdlock.Queue, []etcdlock.Queue) {
	elected := map[string]bool{}
	var keptElections []etcdlock.Queue
	for _, q := range electionQs {
		if !empty(q) {
			elected[q.Name] = true
			keptElections = append(keptElections, q)
		}
	}
	var keptLocks []etcdlock.Queue
	for _, q := range lockQs {
		if !empty(q) || !elected[q.Name] {
			keptLocks = append(keptLocks, q)
		}
	}
	return keptLocks, keptElections
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
		if errors.Is(err, etcdlock.ErrInvalidName) {
			return q, bad("%v", err)
		}
		return q, fail(exitUnavailable, "%v", err)
	}
	return q, nil
}

func printStatus(out io.Writer, locks, elections []etcdlock.Queue) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tROLE\tTOKEN\tOWNER\tQUEUED\tTTL\tLEASE\tDATA")
	for i, qs := range [][]etcdlock.Queue{locks, elections} {
		kind, head, tail := "lock", "holder", "waiter"
		if i == 1 {
			kind, head, tail = "election", "leader", "candidate"
		}
		for _, q := range qs {
			if q.Holder == nil {
				fmt.Fprintf(tw, "%s\t%s\tfree\t-\t-\t-\t-\t-\t-\n", kind, q.Name)
				continue
			}
			printEntry(tw, kind, q.Name, head, *q.Holder)
			for _, w := range q.Waiters {
				printEntry(tw, kind, q.Name, tail, w)
			}
		}
	}
	return tw.Flush()
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
