package etcdlock

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
	// second makes an acquisition's second key: one it claims after its
	// turn, whose create revision is then its token (see secondKey). nil
	// for a kind that holds by its queue key.
	second func(*Client, spot) secondKey
	// The spans: of an acquisition that waits, of one that gives up at
	// once, and of a release.
	waitSpan, trySpan, releaseSpan string
}

// kindTable is the one table of kinds (see kindInfo); TestKindTable checks
// that every kind has a complete row.
var kindTable = [numKinds]kindInfo{
	kindLock: {name: "lock", queue: layout.lockQueue, ended: ErrUnlocked,
		waitSpan: "etcdlock.Lock", trySpan: "etcdlock.TryLock", releaseSpan: "etcdlock.Unlock"},
	kindElection: {name: "election", queue: layout.electionQueue, ended: ErrResigned,
		waitSpan: "etcdlock.Campaign", trySpan: "etcdlock.Campaign", releaseSpan: "etcdlock.Resign"},
	kindRead: {name: "read", queue: layout.lockQueue, ended: ErrUnlocked, reader: true,
		waitSpan: "etcdlock.RLock", trySpan: "etcdlock.TryRLock", releaseSpan: "etcdlock.Unlock"},
	kindSemaphore: {name: "semaphore", queue: layout.semQueue, ended: ErrUnlocked, second: newPermit,
		waitSpan: "etcdlock.Acquire", trySpan: "etcdlock.TryAcquire", releaseSpan: "etcdlock.Unlock"},
	// Members are readers of their queue, which has no writers: all hold
	// at once, each with a key on its session's lease.
	kindMember: {name: "member", queue: layout.groupMembers, ended: ErrUnlocked, reader: true,
		waitSpan: "etcdlock.Join", trySpan: "etcdlock.Join", releaseSpan: "etcdlock.Leave"},
	kindPartition: {name: "partition", queue: layout.partitionQueue, ended: ErrUnlocked,
		waitSpan: "etcdlock.Partition", trySpan: "etcdlock.Partition", releaseSpan: "etcdlock.Handoff"},
}
