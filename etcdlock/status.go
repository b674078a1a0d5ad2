package etcdlock

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// StatusScope chooses what [Client.WatchStatus] follows. The zero value
// follows every lock, election, semaphore and group under the Client's
// prefix ([WithPrefix]).
type StatusScope struct {
	// Names are the names followed: for each, its lock, election,
	// semaphore and group, all four reported, empty or not, as
	// [Client.Inspect] reports a free lock. Each must be a valid name
	// ([ValidateName]). None: every name that has a key.
	Names []string
	// Prefix makes each of Names a prefix of names, as etcdctl's --prefix
	// makes a key one: every lock, election, semaphore and group whose name
	// begins with one of them is followed, and reported while it has a key.
	Prefix bool
}

// Status is what [Client.WatchStatus] reports: the locks, elections,
// semaphores and groups of its scope, each as [Client.Inspect],
// [Client.InspectElection], [Client.InspectSemaphore] and
// [Client.InspectGroup] would read it (they share the code that decodes
// the keys), except for the TTLs (see [Client.WatchStatus]).
type Status struct {
	// Rev is the etcd revision of the read the watch began with, or of the
	// latest change it has applied since; every queue's Rev is this one.
	Rev int64
	// Locks, Elections, Semaphores and Groups are in the order of the
	// scope's Names, or by name.
	Locks      []Queue
	Elections  []Queue
	Semaphores []SemaphoreQueue
	Groups     []GroupStatus
	// Err is not nil when the watch was interrupted (etcd compacted the
	// revisions it needed, the connection or the watch stream failed) or a
	// read to resume it failed: the rest is the last status known, and a
	// Status with a nil Err follows once the keys are read afresh.
	Err error
}

// statusSpaces are the key spaces a Status shows, in the order of its
// fields.
var statusSpaces = [...]string{spaceLock, spaceElect, spaceSem, spaceGroup}

// ranges returns the key prefixes that scope s covers under layout p: per
// key space, one per name (or prefix of names), or the space itself. None
// is a prefix of another, so that no key is watched twice.
func (s StatusScope) ranges(p layout) []string {
	var rs []string
	for _, sp := range statusSpaces {
		if len(s.Names) == 0 {
			rs = append(rs, p.space(sp))
		}
		for _, name := range s.Names {
			r := p.space(sp) + escapeName(name)
			if !s.Prefix {
				r += "/"
			}
			rs = append(rs, r)
		}
	}
	slices.Sort(rs)
	kept := rs[:0]
	for _, r := range rs { // sorted: a range inside another comes after it
		if len(kept) == 0 || !strings.HasPrefix(r, kept[len(kept)-1]) {
			kept = append(kept, r)
		}
	}
	return kept
}

// validate checks the scope's names.
func (s StatusScope) validate() error {
	for _, name := range s.Names {
		if err := validateName(name); err != nil {
			return err
		}
	}
	return nil
}

// statusOf is the status of scope s from keys, the keys of its ranges as
// of revision rev, with each entry's TTL taken from ttls. It does no I/O.
func (p layout) statusOf(s StatusScope, keys map[string]*mvccpb.KeyValue, rev int64, ttls leaseTTLs) Status {
	var byName [len(statusSpaces)]map[string][]*mvccpb.KeyValue
	for i, sp := range statusSpaces {
		byName[i] = map[string][]*mvccpb.KeyValue{}
		for key, kv := range keys {
			if name, ok := p.nameIn(sp, key); ok && validateName(name) == nil {
				byName[i][name] = append(byName[i][name], kv)
			}
		}
	}
	st := Status{Rev: rev}
	for _, name := range s.namesOf(byName[0]) {
		st.Locks = append(st.Locks, queueOf(name, rev, inCreateOrder(byName[0][name]), ttls))
	}
	for _, name := range s.namesOf(byName[1]) {
		st.Elections = append(st.Elections, queueOf(name, rev, inCreateOrder(byName[1][name]), ttls))
	}
	for _, name := range s.namesOf(byName[2]) {
		queue, permits := splitPrefix(inCreateOrder(byName[2][name]), p.semQueue(name))
		sq, _ := p.semaphoreOf(name, rev, queue, permits, ttls)
		st.Semaphores = append(st.Semaphores, sq)
	}
	for _, name := range s.namesOf(byName[3]) {
		st.Groups = append(st.Groups, p.groupOf(name, 0, rev, inCreateOrder(byName[3][name]), ttls))
	}
	return st
}

// namesOf is the names a Status shows of one key space, whose keys by name
// are byName: the scope's own names, without repeats, or the names that
// have keys, sorted.
func (s StatusScope) namesOf(byName map[string][]*mvccpb.KeyValue) []string {
	if len(s.Names) > 0 && !s.Prefix {
		var names []string
		for _, name := range s.Names {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		return names
	}
	return slices.Sorted(maps.Keys(byName))
}

// inCreateOrder sorts kvs by create revision (then key: keys created by
// one transaction share it), as a read sorted by create revision returns
// them, and returns them.
func inCreateOrder(kvs []*mvccpb.KeyValue) []*mvccpb.KeyValue {
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int {
		return cmp.Or(cmp.Compare(a.CreateRevision, b.CreateRevision), strings.Compare(string(a.Key), string(b.Key)))
	})
	return kvs
}

// splitPrefix returns the keys of kvs under prefix, and the rest, each in
// the order of kvs.
func splitPrefix(kvs []*mvccpb.KeyValue, prefix string) (in, out []*mvccpb.KeyValue) {
	for _, kv := range kvs {
		if strings.HasPrefix(string(kv.Key), prefix) {
			in = append(in, kv)
		} else {
			out = append(out, kv)
		}
	}
	return in, out
}
