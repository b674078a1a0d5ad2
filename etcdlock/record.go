package etcdlock

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
)

// MaxOwnerLen is the longest owner identity accepted ([WithOwner]), in bytes.
const MaxOwnerLen = 256

// MaxDataLen is the longest caller data accepted with an acquisition (lock
// metadata, [WithMetadata]; an election value, [Client.Campaign]), in bytes.
// The data must also be valid UTF-8.
const MaxDataLen = 4 << 10

// recordVersion is the version of the record this package writes.
const recordVersion = 1

// record is the value of every queue key this package writes: a small JSON
// object, readable with etcdctl, e.g.
//
//	{"v":1,"owner":"host-7/4121","acquired":"2026-11-30T10:02:03.5Z","data":"nightly"}
//
// v is the format's version (1); owner the Client's owner identity
// ([WithOwner]); acquired the wall-clock time the key was written, for
// humans only: nothing in this package reads it for safety; data the
// caller's metadata or the election value, omitted when empty. Readers
// ignore fields they do not know. Keys with another value (written by an
// older version of this package, or by hand) read as an unknown owner.
type record struct {
	V        int       `json:"v"`
	Owner    string    `json:"owner"`
	Acquired time.Time `json:"acquired"`
	Data     string    `json:"data,omitempty"`
	Permits  int       `json:"permits,omitempty"` // a semaphore's
	Slot     *int      `json:"slot,omitempty"`    // a semaphore's permit, once claimed
}

// encodeRecord returns the value of a key written by owner, acquired at
// at, with data.
func encodeRecord(owner string, at time.Time, data string) string {
	return encodeRecordSlot(owner, at, data, 0, -1)
}

// encodeRecordSlot is encodeRecord for a semaphore of permits (0: none)
// whose permit slot is slot (-1: none yet).
// It writes what json.Marshal writes of a record, without its reflection,
// which cost a third of Lock's own CPU time, into a buffer on the stack
// (for a record of up to recordBuf bytes), so that the string is its one
// allocation.
func encodeRecordSlot(owner string, at time.Time, data string, permits, slot int) string {
	var buf [recordBuf]byte
	b := buf[:0]
	b = strconv.AppendInt(append(b, `{"v":`...), recordVersion, 10)
	b = appendJSON(append(b, `,"owner":`...), owner)
	b = append(at.UTC().Round(time.Millisecond).AppendFormat(append(b, `,"acquired":"`...), time.RFC3339Nano), '"')
	if data != "" {
		b = appendJSON(append(b, `,"data":`...), data)
	}
	if permits != 0 {
		b = strconv.AppendInt(append(b, `,"permits":`...), int64(permits), 10)
	}
	if slot >= 0 {
		b = strconv.AppendInt(append(b, `,"slot":`...), int64(slot), 10)
	}
	return string(append(b, '}'))
}

// recordBuf is the size of encodeRecordSlot's buffer on the stack: a
// record with an owner "host/pid" and no data takes about 90 bytes.
const recordBuf = 256

// appendJSON appends s as a JSON string, as json.Marshal writes it; a
// string without a byte to escape (an owner "host/pid", mostly) as it is.
func appendJSON(b []byte, s string) []byte {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || strings.ContainsRune(`"\<>&`, r) || r >= utf8.RuneSelf }) {
		return append(append(append(b, '"'), s...), '"')
	}
	q, _ := json.Marshal(s) // a string: cannot fail
	return append(b, q...)
}

// recordOf decodes a queue key's value; the zero record when it is not a
// record of a version this package reads.
func recordOf(v []byte) record {
	var r record
	if json.Unmarshal(v, &r) != nil || r.V < recordVersion { // later versions keep these fields
		return record{}
	}
	return r
}

// defaultOwner is "hostname/pid".
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// Entry is one acquisition in a lock's queue or an election: the holder (or
// leader) or a waiter, as read from etcd.
//
// Owner, Acquired and Data come from the key's value: empty (zero) when the
// key was written by something else than this package (an older version, a
// foreign writer, etcdctl); such keys still take their turn like any other.
type Entry struct {
	// Key is the etcd key of the acquisition.
	Key string
	// Token is the key's create revision: the fencing token of the
	// acquisition once it holds the lock or leads.
	Token fence.Token
	// Rev is the key's mod revision; an election's Proclaim moves it.
	Rev int64
	// Lease is the lease the key is attached to.
	Lease clientv3.LeaseID
	// TTL is the time the lease had left when it was read, rounded down to
	// whole seconds by etcd; in a [Status] from [Client.WatchStatus], the
	// lease's granted TTL instead. -1 when it was not read
	// ([Client.Observe]) or the lease was gone.
	TTL time.Duration
	// Owner is the owner identity of the Client that wrote the key
	// ([WithOwner]); "" when unknown.
	Owner string
	// Acquired is the wall-clock time the key was written, as the writer's
	// clock told it; zero when unknown. For people reading it only.
	Acquired time.Time
	// Data is the caller's data: an acquisition's metadata
	// ([WithMetadata]), an election's value ([Client.Campaign],
	// [Term.Proclaim]); for a group's partition, the key of the member it
	// belongs to ([GroupStatus.MemberOf]).
	Data string
	// Shared is set for a reader's acquisition ([Client.RLock]).
	Shared bool
	// Slot is the slot of a semaphore's permit ([Lock.Slot]); -1 when the
	// entry has none: every entry but a semaphore holder's that has
	// claimed its slot.
	Slot int
}

// OwnerOrUnknown returns Owner, or "unknown owner" when it is empty.
func (e Entry) OwnerOrUnknown() string {
	if e.Owner == "" {
		return "unknown owner"
	}
	return e.Owner
}

// String describes the entry for a log line, e.g.
// "host-7/4121 (token 812) since 10:02:03"; a reader's says "reader".
func (e Entry) String() string { return e.format(false) }

// format is String, with a semaphore permit's slot when withSlot.
func (e Entry) format(withSlot bool) string {
	s := fmt.Sprintf("%s (token %d)", e.OwnerOrUnknown(), e.Token)
	switch {
	case e.Shared:
		s = fmt.Sprintf("%s (reader, token %d)", e.OwnerOrUnknown(), e.Token)
	case withSlot && e.Slot >= 0:
		s = fmt.Sprintf("%s (token %d, slot %d)", e.OwnerOrUnknown(), e.Token, e.Slot)
	}
	if !e.Acquired.IsZero() {
		s += " since " + e.Acquired.Local().Format(time.TimeOnly)
	}
	return s
}

// entryOf reads a queue key. A value that is not a record of a version this
// package reads leaves Owner, Acquired and Data empty: never an error.
func entryOf(kv *mvccpb.KeyValue) Entry {
	key := string(kv.Key)
	e := Entry{
		Key: key, Token: fence.Token(kv.CreateRevision), Rev: kv.ModRevision,
		Lease: clientv3.LeaseID(kv.Lease), TTL: -1,
		Shared: isReaderKey(key), Slot: -1,
	}
	r := recordOf(kv.Value)
	e.Owner, e.Acquired, e.Data = r.Owner, r.Acquired, r.Data
	if r.Slot != nil {
		e.Slot = *r.Slot
	}
	return e
}

// permitValue is the value of a semaphore's slot's key (semaphore.go):
// the queue key of the acquisition that holds the slot, that key's create
// revision, and the semaphore's permits as its caller gave them.
type permitValue struct {
	Key     string `json:"key"`
	Rev     int64  `json:"rev"`
	Permits int    `json:"permits"`
}
