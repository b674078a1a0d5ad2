package check

import (
	"encoding/json"
	"io"
	"math"
	"sort"
	"time"
)

// Attempt is one write as the workers tell it: invoked at Call, answered
// at Return with Outcome. A write whose worker died before answering has
// outcome unknown and Return math.MaxInt64.
type Attempt struct {
	Worker  string
	Res     ResKind
	Key     string
	Token   int64
	Seq     int64
	Value   string
	Call    int64
	Return  int64
	Outcome Outcome
	Read    bool // a read that saw Value, not a write
	// Transfer is the bank transfer the attempt made on its store (Res),
	// as its done event, or else its invoke event, tells it.
	Transfer *Transfer
}

// Resource names the storage resource the attempt wrote to.
func (a Attempt) Resource() string { return ResourceName(a.Res, a.Key) }

// ResourceName names the resource of the given kind for key, as [Storage]
// keys it.
func ResourceName(kind ResKind, key string) string { return string(kind) + ":" + key }

// WriteEvents writes events to w as JSON lines, if w is not nil.
func WriteEvents(w io.Writer, events []Event) error {
	if w == nil {
		return nil
	}
	enc := json.NewEncoder(w)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

// Attempts pairs invoke and done events into write attempts, in invocation
// order, after the reads.
func Attempts(events []Event) []Attempt {
	type id struct {
		w   string
		seq int64
	}
	byID := map[id]*Attempt{}
	var order []id
	var out []Attempt
	for _, e := range events {
		k := id{e.Worker, e.Seq}
		switch e.Ev {
		case EvInvoke:
			byID[k] = &Attempt{Worker: e.Worker, Res: e.Res, Key: e.Key, Token: e.Token, Seq: e.Seq,
				Value: e.Value, Call: e.Time, Return: math.MaxInt64, Outcome: OutUnknown, Transfer: e.Transfer}
			order = append(order, k)
		case EvRead:
			out = append(out, Attempt{Worker: e.Worker, Res: e.Res, Key: e.Key, Value: e.Value,
				Call: e.Call, Return: e.Time, Outcome: OutOK, Read: true})
		case EvDone:
			if a := byID[k]; a != nil {
				a.Return, a.Outcome = e.Time, e.Outcome
				if e.Transfer != nil {
					a.Transfer = e.Transfer
				}
			}
		}
	}
	for _, k := range order {
		out = append(out, *byID[k])
	}
	return out
}

// lockWaits returns how long each successful Lock call waited, sorted.
func lockWaits(events []Event) []time.Duration {
	var ws []time.Duration
	for _, e := range events {
		if e.Ev == EvLock && e.OK {
			ws = append(ws, time.Duration(e.WaitNs))
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
	return ws
}

// percentile returns the p-th percentile (0..100) of sorted ds, or 0.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[max(i, 0)]
}
