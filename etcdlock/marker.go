package etcdlock

import (
	"context"
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

// moved records that a release of t's use moved the marker to rev.
func (t *ticket) moved(rev int64) {
	t.mark = rev
	t.unmarked.Store(false)
}

// releaseMark is the marker write of a release of t's use that deletes its
// queue key, created at rev: markOurs(rev), and markGone(rev) when t holds
// by a second key that is no longer the one it claimed. Such a hold is its
// second key, not its queue key: when someone deleted the second key
// (etcdctl del), another acquisition may have held it since, and the
// release must say the hold was lost (see secondTaken), as it does for a
// lock whose key was deleted. etcd evaluates a transaction's nested
// compares before any of its operations, so the deletion of the second key
// in the same transaction does not change the answer.
func (t *ticket) releaseMark(s *session, rev int64) clientv3.Op {
	held, ok := t.secondHeld()
	if !ok {
		return t.marker.put(s, markOurs(rev))
	}
	return clientv3.OpTxn([]clientv3.Cmp{held}, []clientv3.Op{t.marker.put(s, markOurs(rev))}, []clientv3.Op{t.marker.put(s, markGone(rev))})
}

// block writes t's marker, so that a create of this use of the lane whose
// outcome is unknown can no longer land, and returns the create revision of
// the lane's key if it exists: the create landed (no one else writes keys
// of this session's lanes), and the key is ours to delete.
//
// The marker is written only while it is at t.mark, the revision this use's
// last create compared: if it has moved, that create can no longer land
// anyway, and an unconditional write delivered late (after the lane was
// reused) would overwrite the tag of a later use's release, which then
// takes its own deletion for someone else's.
func (c *Client) block(ctx context.Context, s *session, t *ticket) (int64, error) {
	resp, err := c.cli.Txn(ctx).
		If(t.marker.at(t.mark)).
		Then(t.marker.put(s, markNone), clientv3.OpGet(t.key)).
		Else(t.marker.get(), clientv3.OpGet(t.key)).
		Commit()
	if err != nil {
		return 0, err
	}
	t.unmarked.Store(false) // moved now, or before: no create of this use can land
	if resp.Succeeded {
		t.mark = resp.Header.Revision
	} else if m := markRev(resp.Responses[0].GetResponseRange().Kvs); m != 0 {
		t.mark = m
	}
	if k := resp.Responses[1].GetResponseRange().Kvs; len(k) > 0 {
		return k[0].CreateRevision, nil
	}
	return 0, nil
}
