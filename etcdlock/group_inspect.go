package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GroupStatus is a group as read from etcd by [Group.Inspect]: its
// members, who owns each partition with which token, and the moves the
// members' share still asks for.
type GroupStatus struct {
	// Name and Partitions are the group's.
	Name       string
	Partitions int
	// Rev is the etcd revision of the read.
	Rev int64
	// Members are the workers in the group, in the order they joined.
	// A member's Data is empty; its Token is its member key's create
	// revision.
	Members []Entry
	// Others are members that give the group another number of partitions
	// (see [ErrPartitions]), left out of the share.
	Others []Entry
	// Owners has one element per partition, in order.
	Owners []PartitionStatus
	// Moves is how many partitions are not yet owned by the member the
	// share gives them to (unowned ones included): 0 once the group has
	// settled.
	Moves int
}

// PartitionStatus is one partition of a [GroupStatus].
type PartitionStatus struct {
	// Partition is the partition's number.
	Partition int
	// Owner is the acquisition that owns the partition, nil when none.
	// Its Token is the partition's token.
	Owner *Entry
	// Waiters are the acquisitions waiting for the partition (a worker
	// the share now gives it to, while the owner finishes).
	Waiters []Entry
	// Assigned is the Key of the member the share gives the partition to,
	// "" when the group has no member.
	Assigned string
}

// Empty reports whether the group has no key: no member, and no
// partition with an owner or a waiter.
func (s GroupStatus) Empty() bool {
	return len(s.Members) == 0 && len(s.Others) == 0 &&
		!slices.ContainsFunc(s.Owners, func(p PartitionStatus) bool { return p.Owner != nil || len(p.Waiters) > 0 })
}

func (GroupStatus) nameValue() {}

// Owned returns how many partitions each member owns, by member Key: what
// the share looks like now (see [GroupStatus.MemberOf]).
func (s GroupStatus) Owned() map[string]int {
	n := make(map[string]int, len(s.Members))
	for _, m := range s.Members {
		n[m.Key] = 0
	}
	for _, p := range s.Owners {
		if p.Owner != nil {
			if k := s.MemberOf(*p.Owner); k != "" {
				n[k]++
			}
		}
	}
	return n
}

// MemberOf returns the Key of the member an acquisition of a partition
// belongs to: the member its record names (a partition's Data is its
// member's key), or for a record that names none the member of the same
// session (lease); "" when it is no member's.
func (s GroupStatus) MemberOf(e Entry) string {
	for _, m := range s.Members {
		if e.Data == m.Key {
			return m.Key
		}
	}
	if e.Data != "" {
		return "" // a member gone, or one that gives another N
	}
	for _, m := range s.Members {
		if m.Lease == e.Lease {
			return m.Key
		}
	}
	return ""
}

// Inspect reads the group in one request (and one per distinct lease for
// its TTL): its members, each partition's owner and waiters, and the
// share the members make, as [GroupStatus] tells. A partition's owner
// counts as the member its record names (see [GroupStatus.MemberOf]).
func (g *Group) Inspect(ctx context.Context) (GroupStatus, error) {
	if err := checkCall(ctx, g == nil || g.c == nil || g.c.cli == nil, "Group", "Inspect"); err != nil {
		return GroupStatus{}, err
	}
	return g.c.inspectGroup(ctx, g.name, g.n)
}

// InspectGroup is [Group.Inspect] for a group whose number of partitions
// the caller does not know (an operator's tool): it takes the number its
// oldest member gives, or, with no member, one more than the highest
// partition with a key (0 for a group with no key at all).
func (c *Client) InspectGroup(ctx context.Context, name string) (GroupStatus, error) {
	if err := c.checkCall(ctx, "InspectGroup"); err != nil {
		return GroupStatus{}, err
	}
	if err := validateName(name); err != nil {
		return GroupStatus{}, err
	}
	return c.inspectGroup(ctx, name, 0)
}

// inspectGroup reads group name of n partitions (0: as InspectGroup
// finds).
func (c *Client) inspectGroup(ctx context.Context, name string, n int) (GroupStatus, error) {
	resp, err := c.cli.Get(ctx, c.keys().group(name), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return GroupStatus{}, fmt.Errorf("etcdlock: Inspect group %q: %w", name, c.explain(err))
	}
	ttls, err := c.readTTLs(ctx, resp.Kvs)
	if err != nil {
		return GroupStatus{}, fmt.Errorf("etcdlock: Inspect group %q: %w", name, c.explain(err))
	}
	return c.keys().groupOf(name, n, resp.Header.Revision, resp.Kvs, ttls), nil
}

// groupOf is group name of n partitions (0: as InspectGroup finds) whose
// keys are kvs, in create order, as of revision rev, each entry's TTL
// taken from ttls. It does no I/O: Inspect builds its status with it from
// a read, WatchStatus from the keys its watch keeps.
func (p layout) groupOf(name string, n int, rev int64, kvs []*mvccpb.KeyValue, ttls leaseTTLs) GroupStatus {
	mq, pq := p.groupMembers(name), p.groupPartitions(name)
	if n == 0 {
		n = partitionsOf(kvs, mq, pq)
	}
	st := GroupStatus{Name: name, Partitions: n, Rev: rev, Owners: make([]PartitionStatus, n)}
	queues := make([][]*mvccpb.KeyValue, n)
	for _, kv := range kvs {
		key := string(kv.Key)
		if strings.HasPrefix(key, mq) {
			st.addMember(kv, ttls)
			continue
		}
		if k, ok := partitionOf(pq, key); ok && k < n { // a higher one is of another number of partitions
			queues[k] = append(queues[k], kv)
		}
	}
	st.addPartitions(queues, ttls)
	return st
}

// addMember adds the member whose key is kv to st's Members, or to its
// Others when it gives another number of partitions.
func (st *GroupStatus) addMember(kv *mvccpb.KeyValue, ttls leaseTTLs) {
	e := entryOf(kv)
	e.TTL = ttls.of(e.Lease)
	if recordOf(kv.Value).Permits != st.Partitions {
		st.Others = append(st.Others, e)
		return
	}
	st.Members = append(st.Members, e)
}

// addPartitions sets st's partitions from their queues' keys, in create
// order, and counts the moves the members' share asks for.
func (st *GroupStatus) addPartitions(queues [][]*mvccpb.KeyValue, ttls leaseTTLs) {
	names := make([]string, len(st.Members))
	for i, m := range st.Members {
		names[i] = m.Key
	}
	owners, members := assign(names, st.Partitions)
	for k, kvs := range queues {
		p := &st.Owners[k]
		p.Partition = k
		if i := owners[k]; i >= 0 {
			p.Assigned = members[i]
		}
		for i, kv := range kvs {
			e := entryOf(kv)
			e.TTL = ttls.of(e.Lease)
			if i == 0 {
				p.Owner = &e
			} else {
				p.Waiters = append(p.Waiters, e)
			}
		}
		if p.Assigned != "" && (p.Owner == nil || st.MemberOf(*p.Owner) != p.Assigned) {
			st.Moves++
		}
	}
}

// partitionsOf is the number of partitions the oldest member of kvs (a
// group's keys in create order) gives, or one more than the highest
// partition that has a key.
func partitionsOf(kvs []*mvccpb.KeyValue, mq, pq string) int {
	highest := -1
	for _, kv := range kvs {
		key := string(kv.Key)
		if strings.HasPrefix(key, mq) {
			if n := recordOf(kv.Value).Permits; n > 0 && n <= MaxPartitions {
				return n
			}
			continue
		}
		if k, ok := partitionOf(pq, key); ok && k < MaxPartitions {
			highest = max(highest, k)
		}
	}
	return highest + 1
}
