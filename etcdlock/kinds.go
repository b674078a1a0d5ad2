package etcdlock

import "slices"

// kind is what is acquired: a lock (a writer's, for a read/write lock), a
// reader's share of a lock, an election's term, a semaphore's permit, or a
// group's membership or partition.
type kind uint8

const (
	kindLock kind = iota
	kindElection
	kindRead
	kindSemaphore
	kindMember    // a worker's membership of a group (group.go)
	kindPartition // a worker's ownership of one partition of a group
	numKinds
)

// kindInfo is what the engine knows of a kind. A new kind is a constant
// above, a row of kindTable, and its own file with the calls that make a
// spot of it (as rwlock.go, election.go and semaphore.go do); the engine
// reads the kind's properties here and names no kind's file.
type kindInfo struct {
	name string // the fencelock.kind attribute, and "kind" in logs
	// queue is the queue of the one called name, in the kind's key
	// space (keys.go).
	queue func(p layout, name string) string
	ended error // what Err says after a release (spot.ended)
	// reader: it waits only for the writers queued before it, and its key
	// sorts after theirs (readerMark; ticket.blockers).
	reader bool
	// second makes an acquisition's second key: one it claims once its
	// turn has come (or in the read that finds it come), whose create
	// revision is then its token (see secondKey). nil
	// for a kind that holds by its queue key.
	// The key space, the name, and its callers' agreed number (spot.agreed)
	// make it.
	second newSecondKey
	// The spans: of an acquisition that waits, of one that gives up at
	// once, and of a release.
	waitSpan, trySpan, releaseSpan string
	// space is the key space its queues are in, as the read side (Status,
	// List, the CLI) shows it. Kinds that share a space point to one.
	space *keySpace
}

// keySpace is a key space under a Client's prefix (keys.go) as the read
// side shows it: [Client.Status] has a [Section] per space, [Client.List]
// lists a space's names, the layout reserves its segment (layoutSegments).
type keySpace struct {
	seg  string // its segment under the prefix
	kind string // Section.Kind, List's kind, and the noun the docs use
	// read is how a name's keys in the space read: as one queue (a kind
	// that fits the queue rule), a semaphore's or a group's.
	read readShape
}

// readShape is how the keys of one name read (status.go): the types of
// [NameValue].
type readShape uint8

const (
	readQueue     readShape = iota // one queue, held by its first keys: a [Queue]
	readSemaphore                  // a queue and permit keys: a [SemaphoreQueue]
	readGroup                      // a members' queue, a queue per partition: a [GroupStatus]
)

// The key spaces of kindTable's rows.
var (
	lockSpace  = &keySpace{seg: spaceLock, kind: "lock"} // locks and their readers
	electSpace = &keySpace{seg: spaceElect, kind: "election"}
	semSpace   = &keySpace{seg: spaceSem, kind: "semaphore", read: readSemaphore}
	groupSpace = &keySpace{seg: spaceGroup, kind: "group", read: readGroup} // members and partitions
)

// kindTable is the one table of kinds (see kindInfo); TestKindTable checks
// that every kind has a complete row.
var kindTable = [numKinds]kindInfo{
	kindLock: {name: "lock", queue: layout.lockQueue, ended: ErrUnlocked,
		waitSpan: "etcdlock.Lock", trySpan: "etcdlock.TryLock", releaseSpan: "etcdlock.Unlock", space: lockSpace},
	kindElection: {name: "election", queue: layout.electionQueue, ended: ErrResigned,
		waitSpan: "etcdlock.Campaign", trySpan: "etcdlock.Campaign", releaseSpan: "etcdlock.Resign", space: electSpace},
	kindRead: {name: "read", queue: layout.lockQueue, ended: ErrUnlocked, reader: true,
		waitSpan: "etcdlock.RLock", trySpan: "etcdlock.TryRLock", releaseSpan: "etcdlock.Unlock", space: lockSpace},
	kindSemaphore: {name: "semaphore", queue: layout.semQueue, ended: ErrUnlocked, second: newPermit,
		waitSpan: "etcdlock.Acquire", trySpan: "etcdlock.TryAcquire", releaseSpan: "etcdlock.Unlock", space: semSpace},
	// Members are readers of their queue, which has no writers: all hold
	// at once, each with a key on its session's lease.
	kindMember: {name: "member", queue: layout.groupMembers, ended: ErrUnlocked, reader: true,
		waitSpan: "etcdlock.Join", trySpan: "etcdlock.Join", releaseSpan: "etcdlock.Leave", space: groupSpace},
	kindPartition: {name: "partition", queue: layout.partitionQueue, ended: ErrUnlocked,
		waitSpan: "etcdlock.Partition", trySpan: "etcdlock.Partition", releaseSpan: "etcdlock.Handoff", space: groupSpace},
}

// keySpaces are the key spaces of kindTable's rows, each once, in the
// order of the rows: the order of [Status.Sections].
var keySpaces = spacesOf(kindTable[:])

// layoutSegments are the names under a prefix that the layout uses (see
// WithPrefix): the key spaces' and the lane markers'. A prefix containing
// one as a segment would put its keys inside another Client's queues or
// markers.
var layoutSegments = append(segmentsOf(keySpaces), spaceLane)

// spacesOf is the key spaces of rows, each once, in order.
func spacesOf(rows []kindInfo) []*keySpace {
	var sps []*keySpace
	for _, row := range rows {
		if !slices.Contains(sps, row.space) {
			sps = append(sps, row.space)
		}
	}
	return sps
}

// segmentsOf is the segments of sps.
func segmentsOf(sps []*keySpace) []string {
	segs := make([]string, len(sps))
	for i, sp := range sps {
		segs[i] = sp.seg
	}
	return segs
}

// spaceOf is the key space whose kind is kind; nil for none.
func spaceOf(kind string) *keySpace {
	i := slices.IndexFunc(keySpaces, func(sp *keySpace) bool { return sp.kind == kind })
	if i < 0 {
		return nil
	}
	return keySpaces[i]
}

// Kinds returns the kinds of name that etcdlock keeps, each a key space of
// its own: "lock" (a lock and its readers), "election", "semaphore" and
// "group", in the order of [Status.Sections]. They are the kinds
// [Client.List] takes. It returns a new slice each time.
func Kinds() []string {
	kinds := make([]string, len(keySpaces))
	for i, sp := range keySpaces {
		kinds[i] = sp.kind
	}
	return kinds
}
