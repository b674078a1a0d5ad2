package etcdlock

import (
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every operation on a lane's marker is built in this file: the compare of
// a create (at), the writes of a release (releaseMark) and of block, and
// the reads of those that catch up (get, markRev, markedOurs).

// markerKey is the key of a session lane's marker (see lanes). It makes the
// requests of an earlier use of the lane harmless when they arrive late or
// twice: every create of the lane's key compares the marker's mod revision
// with the one last seen (ticket.mark), and every release of the lane
// writes the marker, on the session's lease, so a create of an earlier use
// can no longer land. The value written says how the use ended:
// markOurs(token), its release deleted the key created at token (the key
// watch reads it to tell our Unlock from someone else's delete);
// markGone(token), the release found that key deleted by someone else;
// markNone, block ended a use whose create's outcome was unknown.
type markerKey string

func markOurs(token int64) string { return strconv.FormatInt(token, 10) }
func markGone(token int64) string { return "gone-" + markOurs(token) }

const markNone = ""

// at compares the marker's mod revision with rev (0: no marker).
func (m markerKey) at(rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(string(m)), "=", rev)
}

func (m markerKey) put(s *session, v string) clientv3.Op {
	return clientv3.OpPut(string(m), v, clientv3.WithLease(s.id))
}

func (m markerKey) get() clientv3.Op { return clientv3.OpGet(string(m)) }

// markRev is the mod revision of a marker read as kvs; 0 when there is none.
func markRev(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].ModRevision
}

// markedOurs reports whether a marker read as kvs says that the release of
// the key created at token deleted it.
func markedOurs(kvs []*mvccpb.KeyValue, token int64) bool {
	return len(kvs) > 0 && string(kvs[0].Value) == markOurs(token)
}
