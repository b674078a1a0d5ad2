package etcdlock

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// assign computes the share of the group: owners[k] is the index in
// members (sorted, returned) of partition k's owner. Every worker that
// sees the same members computes the same share. Each member gets
// ⌊n/m⌋ or ⌈n/m⌉ partitions; each partition goes to the member that
// scores it highest (rendezvous hashing) among those with room, the
// partitions whose best score is highest placed first, so that a member
// that joins or leaves moves about n/m partitions, not a reshuffle. It
// takes O(n·m) time and O(n+m) memory.
func assign(names []string, n int) (owners []int, members []string) {
	members = slices.Clone(names)
	slices.Sort(members)
	m := len(members)
	owners = make([]int, n)
	if m == 0 {
		for k := range owners {
			owners[k] = -1
		}
		return owners, members
	}
	seeds := make([]uint64, m)
	for i, name := range members {
		h := fnv.New64a()
		h.Write([]byte(name))
		seeds[i] = h.Sum64()
	}
	type pref struct {
		k    int
		best uint64
	}
	order := make([]pref, n)
	for k := range order {
		best := uint64(0)
		for _, s := range seeds {
			best = max(best, score(s, k))
		}
		order[k] = pref{k: k, best: best}
	}
	slices.SortFunc(order, func(a, b pref) int {
		if c := cmp.Compare(b.best, a.best); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	q, r := n/m, n%m
	count := make([]int, m)
	full := 0 // members with q+1, of the r allowed
	for _, p := range order {
		bi, bs := -1, uint64(0)
		for i, s := range seeds {
			if count[i] > q || count[i] == q && full == r {
				continue
			}
			if sc := score(s, p.k); bi < 0 || sc > bs {
				bi, bs = i, sc
			}
		}
		if count[bi] == q {
			full++
		}
		count[bi]++
		owners[p.k] = bi
	}
	return owners, members
}

// score is member seed's rendezvous score for partition k: splitmix64 of
// the two.
func score(seed uint64, k int) uint64 {
	z := seed ^ (uint64(k)+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
