package azblobfence

import "sync"

// versions caches, per key, the version of the blob as this Store last
// wrote or read it, so that a holder's next Put writes at once with
// If-Match on that ETag, in one request: if the blob is still that ETag,
// it still has that token (every write, metadata alone included, gives a
// blob a new ETag); if not, the write is refused (412) and Put reads the
// blob. The cache holds at most maxCached keys, and is emptied when full.
type versions struct {
	mu sync.Mutex // guards m
	m  map[string]version
}

const maxCached = 10000

func newVersions() *versions { return &versions{m: map[string]version{}} }

func (c *versions) get(key string) (version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *versions) put(key string, v version) {
	if !v.exists() {
		c.drop(key)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[key] = v
}

func (c *versions) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
