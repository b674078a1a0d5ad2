package etcdlock

import (
	"container/heap"
	"sync"
)

// lanes hands out the session's lanes. (A lane was called a slot before a
// semaphore's permits had slots; its markers' key space is still spelled
// "slot", see spaceLane.) A lane names one queue key per
// lock name and one marker key; it is used by one acquisition at a time and
// reused by later ones, lowest first, so that successive acquisitions reuse
// keys (keys that are never reused bloat etcd's key index until the next
// compaction and slow every queue read) and the number of marker keys stays
// at the session's peak number of concurrent acquisitions. The marker's
// protocol is in marker.go (see markerKey).
type lanes struct {
	mu    sync.Mutex    // guards the fields below
	idle  intHeap       // released lanes
	next  int           // lowest lane never used
	marks map[int]int64 // lane -> last known mod revision of its marker
}

// take returns the lowest lane not in use and marks it used, with the last
// known mod revision of its marker key (0: none written yet).
func (sl *lanes) take() (int, int64) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.idle.Len() > 0 {
		n := heap.Pop(&sl.idle).(int)
		return n, sl.marks[n]
	}
	n := sl.next
	sl.next++
	return n, 0
}

// free makes lane n free again once its key is known gone and its
// marker was last written at revision mark.
func (sl *lanes) free(n int, mark int64) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.marks == nil {
		sl.marks = map[int]int64{}
	}
	if mark != 0 {
		sl.marks[n] = mark
	}
	heap.Push(&sl.idle, n)
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
