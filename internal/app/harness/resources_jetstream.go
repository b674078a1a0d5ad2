package harness

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/fence"
	jsfence "github.com/fencelock/fencelock/fence/jetstream"
)

// jsResource is an entry of the run's JetStream key-value bucket: fenced,
// written with fence/jetstream's Store.Put (kv.Update on the key's last
// revision); in the control, with a plain kv.Put of the entry the Store
// would write (its header with the token, then the value), which checks
// nothing.
type jsResource struct {
	nc    *nats.Conn
	kv    natsjs.KeyValue
	store *jsfence.Store
}

// openJSResource connects to the run's nats-server at url and opens its
// bucket.
func openJSResource(ctx context.Context, url, bucket string) (jsResource, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return jsResource{}, err
	}
	r := jsResource{nc: nc}
	js, err := natsjs.New(nc)
	if err == nil {
		r.kv, err = js.KeyValue(ctx, bucket)
	}
	if err == nil {
		r.store, err = jsfence.New(r.kv, jsfence.WithRequestTimeout(etcdTimeout))
	}
	if err != nil {
		nc.Close()
		return jsResource{}, fmt.Errorf("harness: JetStream bucket %s: %w", bucket, err)
	}
	return r, nil
}

func (r jsResource) close() {
	if r.nc != nil {
		r.nc.Close()
	}
}

func (r jsResource) write(ctx context.Context, fenced bool, key string, tok fence.Token, val string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if fenced {
		return r.store.Put(ctx, key, tok, []byte(val))
	}
	_, err := r.kv.Put(ctx, r.store.Key(key), jsEntry(tok, val))
	return err
}

func (r jsResource) read(ctx context.Context, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	rec, err := r.store.Get(ctx, key)
	if errors.Is(err, fence.ErrNotFound) {
		return "", nil
	}
	return string(rec.Value), err
}

// The header of an entry, as fence/jetstream lays it out (its package
// documentation, and jsfence.HeaderSize): magic, flags, token, write id.
const (
	jsMagic     = "fencejsk"
	jsFlagValue = 0 // a record follows; 1 is a floor alone
)

// jsEntry is the entry fence/jetstream would write for tok and val: the
// control's plain kv.Put writes it, so that the Store's reads and the
// history's read it alike.
func jsEntry(tok fence.Token, val string) []byte {
	b := make([]byte, jsfence.HeaderSize, jsfence.HeaderSize+len(val))
	copy(b, jsMagic)
	b[8] = jsFlagValue
	binary.BigEndian.PutUint64(b[9:17], uint64(tok))
	_, _ = rand.Read(b[17:25])
	return append(b, val...)
}

// jsRecord decodes an entry's header: its token and value, and whether
// it holds a record (not a floor alone).
func jsRecord(b []byte) (tok int64, val string, ok bool, err error) {
	if len(b) < jsfence.HeaderSize || string(b[:8]) != jsMagic {
		return 0, "", false, fmt.Errorf("harness: a JetStream entry without fence/jetstream's header: %q", b)
	}
	return int64(binary.BigEndian.Uint64(b[9:17])), string(b[jsfence.HeaderSize:]), b[8] == jsFlagValue, nil
}
