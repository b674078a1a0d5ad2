package etcdlock

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// StatusScope chooses what [Client.Status] and [Client.WatchStatus] read.
// The zero value reads every name of every kind ([Kinds]) under the
// Client's prefix ([WithPrefix]).
type StatusScope struct {
	// Names are the names read: for each, its name of every kind, all
	// reported, empty or not, as [Client.Inspect] reports a free lock.
	// Each must be a valid name ([ValidateName]). None: every name that
	// has a key.
	Names []string
	// Prefix makes each of Names a prefix of names, as etcdctl's --prefix
	// makes a key one: every name of every kind that begins with one of
	// them is read, and reported while it has a key.
	Prefix bool
}

// Status is what [Client.Status] and [Client.WatchStatus] report: the
// names of their scope, a [Section] per kind, each name as the kind's
// Inspect call would read it (they share the code that decodes the
// keys), except for the TTLs in WatchStatus's. The zero value is the
// status of no name.
type Status struct {
	// Rev is the etcd revision of the read, or of the latest change
	// WatchStatus has applied since; every name's Rev is this one.
	Rev int64
	// Sections has one element per kind, in the order of [Kinds], each
	// there even when it has no name. A program that shows every section
	// shows a kind added after it was written.
	Sections []Section
	// Locks, Elections, Semaphores and Groups are the values of the
	// sections of those kinds, typed: Locks the "lock" section's,
	// Elections the "election" section's, Semaphores the "semaphore"
	// section's, Groups the "group" section's. A kind added since has only
	// its Section.
	Locks      []Queue
	Elections  []Queue
	Semaphores []SemaphoreQueue
	Groups     []GroupStatus
	// Err is not nil when WatchStatus's watch was interrupted (etcd
	// compacted the revisions it needed, the connection or the watch
	// stream failed) or a read to resume it failed: the rest is the last
	// status known, and a Status with a nil Err follows once the keys are
	// read afresh. It is nil in what Client.Status returns.
	Err error
}

// Section is the part of a [Status] of one kind of name.
type Section struct {
	// Kind is the kind: one of [Kinds], as [Client.List] takes it.
	Kind string
	// Names are the scope's names of the kind, in the order of
	// [StatusScope.Names], or by name.
	Names []NameStatus
}

// NameStatus is one name of a [Section] and what was read of it.
type NameStatus struct {
	// Name is the name.
	Name string
	// Value is what was read: a [Queue] for a kind held by its queue alone
	// (a lock, shared by readers or not; an election), a [SemaphoreQueue]
	// for a semaphore, a [GroupStatus] for a group. Never nil.
	Value NameValue
}

// NameValue is what a [Status] read of one name: a [Queue], a
// [SemaphoreQueue] or a [GroupStatus]. No other package implements it,
// so that a type switch over those three covers every kind, those added
// later included (their values are Queues).
type NameValue interface {
	// Empty reports whether no one holds or waits: the name has no key.
	Empty() bool
	nameValue()
}

// Section returns the section of kind; the zero Section for a kind s
// has none of.
func (s Status) Section(kind string) Section {
	for _, sec := range s.Sections {
		if sec.Kind == kind {
			return sec
		}
	}
	return Section{}
}

// ranges returns the key prefixes that scope s covers under layout p: per
// key space, one per name (or prefix of names), or the space itself. None
// is a prefix of another, so that no key is watched twice.
func (s StatusScope) ranges(p layout) []string {
	var rs []string
	for _, sp := range keySpaces {
		if len(s.Names) == 0 {
			rs = append(rs, p.space(sp.seg))
		}
		for _, name := range s.Names {
			r := p.space(sp.seg) + escapeName(name)
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
	st := Status{Rev: rev}
	for _, sp := range keySpaces {
		byName := map[string][]*mvccpb.KeyValue{}
		for key, kv := range keys {
			if name, ok := p.nameIn(sp.seg, key); ok && validateName(name) == nil {
				byName[name] = append(byName[name], kv)
			}
		}
		sec := Section{Kind: sp.kind}
		for _, name := range s.namesOf(byName) {
			v := p.valueOf(sp, name, rev, inCreateOrder(byName[name]), ttls)
			sec.Names = append(sec.Names, NameStatus{Name: name, Value: v})
		}
		st.Sections = append(st.Sections, sec)
	}
	st.Locks = sectionValues[Queue](st.Section(lockSpace.kind))
	st.Elections = sectionValues[Queue](st.Section(electSpace.kind))
	st.Semaphores = sectionValues[SemaphoreQueue](st.Section(semSpace.kind))
	st.Groups = sectionValues[GroupStatus](st.Section(groupSpace.kind))
	return st
}

// valueOf is what the keys kvs of the name called name in space sp, in
// create order, as of revision rev, read as, each entry's TTL taken from
// ttls.
func (p layout) valueOf(sp *keySpace, name string, rev int64, kvs []*mvccpb.KeyValue, ttls leaseTTLs) NameValue {
	switch sp.read {
	case readSemaphore:
		queue, permits := splitPrefix(kvs, p.semQueue(name))
		sq, _ := p.semaphoreOf(name, rev, queue, permits, ttls)
		return sq
	case readGroup:
		return p.groupOf(name, 0, rev, kvs, ttls)
	}
	return queueOf(name, rev, kvs, ttls)
}

// sectionValues is the values of sec's names, as V; nil for none.
func sectionValues[V NameValue](sec Section) []V {
	var vs []V
	for _, n := range sec.Names {
		vs = append(vs, n.Value.(V))
	}
	return vs
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
