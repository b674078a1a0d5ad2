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

// watchJSON is a line of status --watch --json: the time, the revision,
// the error when the watch was interrupted (reconnecting), then status
// --json's members.
func watchJSON(now time.Time, st etcdlock.Status, secs []etcdlock.Section) object {
	line := object{{"time", now}, {"rev", st.Rev}}
	if st.Err != nil {
		line = append(line, member{"error", st.Err.Error()})
	}
	return append(line, statusToJSON(secs)...)
}

func printJSON(out io.Writer, secs []etcdlock.Section) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(statusToJSON(secs))
}

// statusToJSON is the object of status --json: per section, in order, a
// member named by its kind in the plural ("locks") whose value has an
// element per name, never null. A kind this command does not know has
// its queues, as a lock has.
func statusToJSON(secs []etcdlock.Section) object {
	res := make(object, 0, len(secs))
	for _, sec := range secs {
		values := []any{}
		for _, n := range sec.Names {
			switch v := n.Value.(type) {
			case etcdlock.Queue:
				values = append(values, toJSON(v))
			case etcdlock.SemaphoreQueue:
				j := toJSON(v.Queue)
				j.Permits = v.Permits
				values = append(values, j)
			case etcdlock.GroupStatus:
				values = append(values, groupToJSON(v))
			}
		}
		res = append(res, member{sec.Kind + "s", values})
	}
	return res
}

// object is a JSON object whose members keep their order.
type object []member

// member is a member of an object.
type member struct {
	key   string
	value any
}

// MarshalJSON encodes o, its members in order.
func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
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
