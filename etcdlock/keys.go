package etcdlock

import (
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The key layout: every key this package writes is built here, and read
// back (a name, a reader's mark, a permit's number) here. Under a Client's
// prefix (WithPrefix, ending in "/"):
//
//	lock/NAME/LEASE-N      a lock's writer (or Lock's) key, in the queue of NAME
//	lock/NAME/rLEASE-N     a reader's key (RLock), after the writers (readerMark)
//	elect/NAME/LEASE-N     an election candidate's key
//	sem/NAME/q/LEASE-N     a semaphore acquisition's key
//	sem/NAME/p/K           a semaphore's permit K, held while it exists
//	group/NAME/m/rLEASE-N  a group member's key (Group.Join), a reader's
//	group/NAME/p/K/LEASE-N a key in the queue of partition K of group NAME
//	slot/LEASE-N           the marker of the session's lane N (marker.go)
//
// LEASE is the session's lease ID in hex, as etcdctl prints it, and N the
// session's lane (lanes.go). NAME is the name escaped (escapeName): a name
// may hold '/', which its key spells %2F, so that no name's keys lie in
// another's queue. PROTOCOL.md describes what each key means.
type layout string // the Client's prefix

// The segments of the key spaces under a prefix: one per keySpace of
// kindTable's rows (kinds.go), and the lane markers'.
const (
	spaceLock  = "lock"
	spaceElect = "elect"
	spaceSem   = "sem"
	spaceGroup = "group"
	spaceLane  = "slot" // spelled as when lanes were called slots: the layout is the protocol
)

// readerMark begins the key of a reader (see [Client.RLock]) after its
// queue's prefix. It sorts after every hex digit, which begin the other
// keys, so that a queue's writers are the range [q, q+readerMark) and its
// readers follow it.
const readerMark = "r"

// space is the prefix of key space sp: the names of its kind follow it.
func (p layout) space(sp string) string { return string(p) + sp + "/" }

// named is the prefix of the keys of name in key space sp: space(sp), the
// name escaped, '/'. It is spelled out as one concatenation, one
// allocation, as every acquisition builds its queue's.
func (p layout) named(sp, name string) string { return string(p) + sp + "/" + escapeName(name) + "/" }

// lockQueue is the queue of lock name: its writers', then its readers' keys.
func (p layout) lockQueue(name string) string { return p.named(spaceLock, name) }

// electionQueue is the queue of the candidates of election name.
func (p layout) electionQueue(name string) string { return p.named(spaceElect, name) }

// semaphore is the prefix of every key of semaphore name: its queue's and
// its permits'.
func (p layout) semaphore(name string) string { return p.named(spaceSem, name) }

// escapeName is name as its keys spell it: '%' is %25 and '/' is %2F, and
// nothing else changes. It is one-to-one and its result has no '/', so
// that a queue (space, escaped name, '/') is the prefix of no other's.
func escapeName(name string) string {
	if !strings.ContainsAny(name, "%/") {
		return name // the common case: no copy
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(name)
}

// unescapeName reverses escapeName; false for a segment escapeName does
// not make (a '/', a '%' not followed by 25 or 2F).
func unescapeName(seg string) (string, bool) {
	if !strings.Contains(seg, "%") {
		return seg, !strings.Contains(seg, "/")
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		switch {
		case seg[i] == '/':
			return "", false
		case seg[i] != '%':
			b.WriteByte(seg[i])
		case strings.HasPrefix(seg[i:], "%25"):
			b.WriteByte('%')
			i += 2
		case strings.HasPrefix(seg[i:], "%2F"):
			b.WriteByte('/')
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

// group is the prefix of every key of group name: its members' and its
// partitions' queues.
func (p layout) group(name string) string { return p.named(spaceGroup, name) }

// groupMembers is the queue of the members of group name.
func (p layout) groupMembers(name string) string { return p.group(name) + "m/" }

// groupPartitions is the prefix of the queues of group name's partitions.
func (p layout) groupPartitions(name string) string { return p.group(name) + "p/" }

// partitionQueue is the queue of a partition, whose lock's name is
// partitionName's: the group's name, '/', the partition's number.
func (p layout) partitionQueue(name string) string {
	i := strings.LastIndexByte(name, '/')
	if i < 0 { // not a partition's name: the group's partitions, never a queue of its own
		return p.groupPartitions(name)
	}
	return p.groupPartitions(name[:i]) + name[i+1:] + "/"
}

// partitionOf is the number of the partition whose queue holds key, under
// dir, a groupPartitions prefix; false for a key that is in none.
func partitionOf(dir, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, dir)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(num)
	return k, err == nil && k >= 0
}

// semQueue is the queue of the acquisitions of semaphore name.
func (p layout) semQueue(name string) string { return p.semaphore(name) + "q/" }

// semPermits is the prefix of the permits' keys of semaphore name; permit
// k's key is permitKey(semPermits(name), k).
func (p layout) semPermits(name string) string { return p.semaphore(name) + "p/" }

// permitKey is the key of permit k under dir, a semPermits prefix.
func permitKey(dir string, k int) string { return dir + strconv.Itoa(k) }

// permitOf is the number of the permit whose key is key under dir, and
// false for a key that is not one.
func permitOf(dir, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, dir)
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	return k, err == nil
}

// marker is the key of the marker of lane n of the session whose lease is
// hex: space(spaceLane), spelled out as one concatenation, one allocation
// (strconv.Itoa makes none for a lane under 100).
func (p layout) marker(hex string, n int) markerKey {
	return markerKey(string(p) + spaceLane + "/" + hex + "-" + strconv.Itoa(n))
}

// leaseHex formats a lease ID as etcdctl does, and as the keys spell it.
func leaseHex(id clientv3.LeaseID) string { return fmt.Sprintf("%016x", int64(id)) }

// queueKey is the key of lane n of the session whose lease is hex in queue
// q, a reader's when reader.
func queueKey(q string, reader bool, hex string, n int) string {
	if reader {
		q += readerMark
	}
	return q + hex + "-" + strconv.Itoa(n)
}

// readersFrom is where the readers' keys of queue q begin; its writers'
// are the range [q, readersFrom(q)).
func readersFrom(q string) string { return q + readerMark }

// isReaderKey reports whether key, a queue's, is a reader's.
func isReaderKey(key string) bool {
	return strings.HasPrefix(key[strings.LastIndex(key, "/")+1:], readerMark)
}

// nameIn is the name, unescaped, whose key, in space sp, is key; false for
// a key of no name.
func (p layout) nameIn(sp, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, p.space(sp))
	if !ok {
		return "", false
	}
	seg, _, ok := strings.Cut(rest, "/")
	if !ok {
		return "", false
	}
	return unescapeName(seg)
}
