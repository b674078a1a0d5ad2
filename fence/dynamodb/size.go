package dynamofence

import (
	"fmt"

	"github.com/fencelock/fencelock/internal/tokentext"
)

// MaxItemSize is DynamoDB's limit on an item's size, 400 KB: the lengths
// of its attribute names and values, summed. A Store's value shares it
// with the key and this package's attributes ([ErrTooLarge]).
const MaxItemSize = 400 << 10

// itemOverhead is the most this package's attributes other than the value
// take in an item: their names, two tokens, a version and an Outbox's
// position (a number takes at most 21 bytes) and a write id, and the
// value's name.
var itemOverhead = len(attrFloor) + len(attrToken) + len(attrVersion) + len(attrWrite) + len(attrValue) + len(attrOutboxPos) +
	2*tokentext.Width + 2*21 + 2*8

// MaxValueSize returns the length of the largest value [Store.Put],
// [Store.Update] and [Store.UpdateAll] write under key: what DynamoDB's
// [MaxItemSize] leaves once the key and this package's attributes are
// counted (a little under 400 KB). A longer one is refused with
// [ErrTooLarge], before it is sent. It is 0 for a nil Store.
func (s *Store) MaxValueSize(key string) int {
	if s == nil {
		return 0
	}
	return max(0, MaxItemSize-len(s.key)-len(key)-itemOverhead)
}

// checkSize refuses a value longer than MaxValueSize, before it is sent.
func (s *Store) checkSize(key string, value []byte) error {
	if n := s.MaxValueSize(key); len(value) > n {
		return fmt.Errorf("%w: %q: a value of %d bytes, over the %d that fit in a DynamoDB item of at most %d bytes with its key",
			ErrTooLarge, key, len(value), n, MaxItemSize)
	}
	return nil
}
