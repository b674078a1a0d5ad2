package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
)

// The JSON of status --json (see its help), and of each line of status
// --watch --json (watchJSON).

// watchJSON is a line of status --watch --json.
type watchJSON struct {
	Time  time.Time `json:"time"`
	Rev   int64     `json:"rev"`
	Error string    `json:"error,omitempty"` // the watch was interrupted: reconnecting
	statusJSON
}

func printJSON(out io.Writer, qs queues) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(statusToJSON(qs))
}

func statusToJSON(qs queues) statusJSON {
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
	return res
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
	j := groupJSON{Name: st.Name, Rev: st.Rev, Partitions: st.Partitions, Moves: st.Moves,
		Members: entriesToJSON(st.Members), Others: entriesToJSON(st.Others), Owners: []partitionJSON{}}
	for _, p := range st.Owners {
		j.Owners = append(j.Owners, partitionJSON{Partition: p.Partition, Owner: entryPtrToJSON(p.Owner),
			Waiters: entriesToJSON(p.Waiters), Assigned: p.Assigned})
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
	return queueJSON{Name: q.Name, Rev: q.Rev, Holder: entryPtrToJSON(q.Holder),
		Holders: entriesToJSON(q.Holders), Waiters: entriesToJSON(q.Waiters)}
}

// entriesToJSON converts es, never to nil: an empty list is [] in JSON.
func entriesToJSON(es []etcdlock.Entry) []entryJSON {
	js := make([]entryJSON, 0, len(es))
	for _, e := range es {
		js = append(js, entryToJSON(e))
	}
	return js
}

// entryPtrToJSON converts e, nil (null in JSON) to nil.
func entryPtrToJSON(e *etcdlock.Entry) *entryJSON {
	if e == nil {
		return nil
	}
	j := entryToJSON(*e)
	return &j
}

func entryToJSON(e etcdlock.Entry) entryJSON {
	ttl := int64(-1)
	if e.TTL >= 0 {
		ttl = int64(e.TTL / time.Second)
	}
	return entryJSON{Key: e.Key, Token: int64(e.Token), Rev: e.Rev, Lease: fmt.Sprintf("%016x", int64(e.Lease)),
		TTLSeconds: ttl, Owner: e.Owner, Acquired: e.Acquired, Data: e.Data, Shared: e.Shared, Slot: e.Slot}
}
