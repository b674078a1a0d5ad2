package s3fence

import (
	"container/list"
	"sync"
)

// version is what a conditional write is based on: an object's ETag and the
// header of its envelope.
type version struct {
	etag string
	hdr  header
}

// versionCache remembers the last version a Store wrote or read for each of
// up to max keys, least recently used out first. An entry is a hint, never
// trusted: a PUT based on it carries If-Match and fails if it is out of date.
// It is safe for concurrent use; a nil *versionCache holds nothing.
type versionCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry, most recent first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key string
	v   version
}

// newVersionCache returns a cache of max entries, or nil if max is 0.
func newVersionCache(max int) *versionCache {
	if max == 0 {
		return nil
	}
	return &versionCache{max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

func (c *versionCache) get(key string) (version, bool) {
	if c == nil {
		return version{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return version{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).v, true
}

func (c *versionCache) put(key string, v version) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		e.Value.(*cacheEntry).v = v
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, v: v})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*cacheEntry).key)
	}
}

func (c *versionCache) drop(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.Remove(e)
		delete(c.byKey, key)
	}
}
