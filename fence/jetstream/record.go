package jsfence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
)

// HeaderSize is the size of the header every entry of a Store begins
// with: the magic "fencejsk", a flags byte (0: a record follows; 1: no
// record, a floor only), the token, 8 bytes big-endian, and the id of the
// write, 8 random bytes (so that a write can tell its own landing from
// another's). The value follows.
const HeaderSize = 25

const (
	magic     = "fencejsk"
	flagValue = 0
	flagNone  = 1
)

// entry is what a read found under a key: its revision (0: none), and its
// header and value.
type entry struct {
	rev   uint64
	token fence.Token
	none  bool // a floor only: deleted, or claimed before any value
	id    uint64
	value []byte
}

// found reports whether the key holds a record of this package's: not
// nothing, and not a floor alone.
func (e entry) found() bool { return e.rev != 0 && !e.none }

func encode(token fence.Token, none bool, id uint64, value []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(value))
	copy(b, magic)
	if none {
		b[8] = flagNone
	}
	binary.BigEndian.PutUint64(b[9:17], uint64(token))
	binary.BigEndian.PutUint64(b[17:25], id)
	return append(b, value...)
}

func decode(key string, rev uint64, b []byte) (entry, error) {
	if len(b) < HeaderSize || string(b[:8]) != magic || b[8] > flagNone {
		return entry{}, fmt.Errorf("%w: %q: no fencelock header", ErrCorrupt, key)
	}
	tok := fence.Token(binary.BigEndian.Uint64(b[9:17]))
	if tok <= 0 {
		return entry{}, fmt.Errorf("%w: %q: token %d", ErrCorrupt, key, tok)
	}
	e := entry{rev: rev, token: tok, none: b[8] == flagNone, id: binary.BigEndian.Uint64(b[17:25])}
	if !e.none {
		e.value = bytes.Clone(b[HeaderSize:])
	}
	return e, nil
}

// MaxKeyLen is the longest bucket key (prefix and resource key) a Store
// sends. A request names the key in its subject, and a server closes the
// connection of a client whose control line is longer than its
// max_control_line (4 KiB by default): every request then in flight on
// it is lost, and the connection stays closed. A longer key is refused
// before any I/O, with an error matching [fence.ErrInvalidKey].
const MaxKeyLen = 1024

// validKey is the keys a JetStream bucket takes (nats.go's own check).
var validKey = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func keyValid(k string) bool {
	return validKey.MatchString(k) && k[0] != '.' && k[len(k)-1] != '.' && !strings.Contains(k, "..")
}

// request returns ctx bounded by the store's request timeout.
func (s *Store) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// read reads key's entry, all of it. A key with no entry, or whose last
// entry is a deletion or a purge (by other means than this package's),
// reads as revision 0.
func (s *Store) read(ctx context.Context, key string) (entry, error) {
	rctx, cancel := s.request(ctx)
	defer cancel()
	kve, err := s.kv.Get(rctx, s.prefix+key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		s.cache.drop(key)
		return entry{}, nil
	case err != nil:
		return entry{}, fmt.Errorf("jsfence: reading %q: %w", key, err)
	}
	e, err := decode(key, kve.Revision(), kve.Value())
	if err == nil {
		s.cache.put(key, e)
	}
	return e, err
}
