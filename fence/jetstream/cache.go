package jsfence

import "sync"

// revisions caches, per key, the header and revision of the entry as this
// Store last wrote or read it, so that a holder's next Put writes at once
// on that revision, in one request: if the key's last revision is still
// that one, it holds those bytes and that token (a stream's sequence
// numbers never repeat, unless the bucket is deleted and created again:
// see [WithoutRevisionCache]); if not, the write is refused and Put reads
// the key. The cache holds at most maxCached keys, and is emptied when
// full. A nil *revisions caches nothing.
type revisions struct {
	mu sync.Mutex // guards m
	m  map[string]entry
}

const maxCached = 10000

func newRevisions() *revisions { return &revisions{m: map[string]entry{}} }

func (r *revisions) get(key string) (entry, bool) {
	if r == nil {
		return entry{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	return e, ok
}

func (r *revisions) put(key string, e entry) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxCached {
		clear(r.m)
	}
	e.value = nil
	r.m[key] = e
}

func (r *revisions) drop(key string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}
