package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/natstest"
)

// jsHistory is how many entries of each key the run's bucket keeps: every
// one a run writes. nats.go creates a bucket with at most 64 (its
// History); the bucket's stream takes more (MaxMsgsPerSubject), and the
// bucket is the same to its writers.
const jsHistory = 1 << 20

// startNATS starts the run's nats-server and creates its bucket, whose
// stream keeps every entry of a key (the history readJetStream checks),
// if the run writes JetStream entries.
func (r *runner) startNATS(ctx context.Context) error {
	if !r.uses(check.ResJetStream) {
		return nil
	}
	var err error
	if r.nats, err = natstest.Start(ctx); err != nil {
		return fmt.Errorf("harness: starting nats-server: %w", err)
	}
	return createJSBucket(ctx, r.nats.URL(), r.bucket())
}

// natsURL is the run's nats-server's URL, "" when it has none.
func (r *runner) natsURL() string {
	if r.nats == nil {
		return ""
	}
	return r.nats.URL()
}

// bucket names the run's JetStream bucket (its own, on a server that may
// be shared: natstest.EnvURL).
func (r *runner) bucket() string { return "fencecheck-" + r.id }

// createJSBucket creates the run's bucket on the nats-server at url, its
// stream keeping every entry of a key (jsHistory), on disk.
func createJSBucket(ctx context.Context, url, bucket string) error {
	nc, js, err := jsConnect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.CreateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: bucket, History: 64, Storage: natsjs.FileStorage})
	if err != nil {
		return fmt.Errorf("harness: creating JetStream bucket %s: %w", bucket, err)
	}
	st, err := js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return err
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgsPerSubject = jsHistory
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("harness: raising JetStream bucket %s's history: %w", bucket, err)
	}
	return nil
}

func jsConnect(url string) (*nats.Conn, natsjs.JetStream, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// readJetStream reads the run's keys' history from the bucket's own
// record: every entry of each key the stream holds (kv.History), in
// revision order, which is the order JetStream applied them. A refused
// kv.Update stores nothing, so it is not there. Entries that are a floor
// alone (a claim, a deletion) write no value and are left out.
func readJetStream(ctx context.Context, h *check.Storage, url, bucket string, keys []string) error {
	nc, js, err := jsConnect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := readJSKey(ctx, h, kv, k); err != nil {
			return err
		}
	}
	return nil
}

func readJSKey(ctx context.Context, h *check.Storage, kv natsjs.KeyValue, key string) error {
	entries, err := kv.History(ctx, key)
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("harness: reading %s's JetStream history: %w", key, err)
	}
	res := check.ResourceName(check.ResJetStream, key)
	for _, e := range entries {
		if e.Operation() != natsjs.KeyValuePut {
			continue
		}
		tok, val, ok, err := jsRecord(e.Value())
		if err != nil {
			return err
		}
		if ok {
			h.Writes[res] = append(h.Writes[res], check.Record{Token: tok, Value: val})
			h.Final[res] = val
		}
	}
	return nil
}
