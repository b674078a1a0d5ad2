package jsfence_test

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	jsfence "github.com/fencelock/fencelock/fence/jetstream"
)

// ignoring is a bucket on a server that ignores the expected revision of
// a write (as a server too old to know the header does): every write lands. It
// is the controls' store with the protection off.
type ignoring struct{ jetstream.KeyValue }

func (i ignoring) Create(ctx context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	return i.Put(ctx, key, value)
}

func (i ignoring) Update(ctx context.Context, key string, value []byte, _ uint64) (uint64, error) {
	return i.Put(ctx, key, value)
}

// twice delivers the next conditional write after on is set twice to the
// server: the write, then a copy of it, and answers with the copy's
// answer (as if the write's own answer was lost), which is a refusal when
// the write landed: the copy expects the revision the write replaced.
type twice struct {
	jsfence.KeyValue
	on *bool // the test's goroutine's, as are the Store's calls
}

func (d twice) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if !*d.on {
		return d.KeyValue.Update(ctx, key, value, rev)
	}
	*d.on = false
	_, _ = d.KeyValue.Update(ctx, key, value, rev)
	return d.KeyValue.Update(ctx, key, value, rev)
}

// sent tells onUpdate, when it has room, as each kv.Update is sent.
type sent struct {
	jsfence.KeyValue
	onUpdate chan<- struct{} // set before use
}

func (s sent) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	select {
	case s.onUpdate <- struct{}{}:
	default:
	}
	return s.KeyValue.Update(ctx, key, value, rev)
}
