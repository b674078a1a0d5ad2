package s3fence

import (
	"bytes"
	"context"

	"github.com/fencelock/fencelock/fence"
)

// Delete removes the record under key, fenced like [Store.Put]: it writes a
// tombstone, an envelope with token and no value, unless the object carries
// a higher token. The tombstone keeps the key's floor, so a stale Put after
// it is refused with [fence.ErrStale]; [Store.Get] and [Decode] report it as
// [fence.ErrNotFound], and a Put with a token at least as high writes the
// key again. Deleting a key that has no object writes a tombstone too.
//
// A plain DeleteObject (aws s3 rm, a lifecycle expiration rule, a console
// delete) removes the floor with the object: the next Put with any token
// lands as on a new key. Use Delete for fenced keys, and keep expiration
// rules off their prefix (tombstones are small; expire them only once no
// holder that could write the key with an older token is left).
//
// Results, errors and the role of ctx are those of [Store.Put].
func (s *Store) Delete(ctx context.Context, key string, token fence.Token) error {
	return s.fencedWrite(ctx, key, header{token: token, deleted: true}, bytes.NewReader(nil), nil)
}
