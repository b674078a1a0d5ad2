package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/etcdlock/etcdlocktest"
	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// TestS3PausedHolder plays the failure fencing exists for, with real
// processes and servers: etcd for the lock, versitygw for the object.
//
// Holder A, a separate process, takes the lock (1 s lease), passes its
// guard's check, writes a first draft and is stopped with SIGSTOP. Its lease
// expires; holder B takes the lock and writes the object. A is resumed with
// SIGCONT and writes again. With fence/s3, the S3 server refuses A's
// conditional PUT (412: B's write changed the ETag) and the object holds B's
// data; in the control, a store that ignores tokens, A's stale write lands.
func TestS3PausedHolder(t *testing.T) {
	testenv.Long(t, "a frozen S3 holder, seconds of lease (TestPostgresPausedHolder stays in the fast loop)")
	t.Parallel() // its own etcd, database (or bucket) and names; it mostly waits on a lease
	etcd := etcdlocktest.New(t)
	srv := s3test.New(t)
	tests := []struct {
		name       string
		fenced     bool
		wantResult string
		wantPuts   string // HTTP status of each of A's PUTs
		wantValue  string
	}{
		{"fenced", true, "stale", "200,412", "B, the new holder"},
		{"control, no fencing", false, "ok", "200,200", "A, the paused holder"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := s3WorkerConfig{
				Etcd: etcd.Endpoints(), S3: srv.Config, Fenced: tt.fenced,
				Lock: fmt.Sprintf("s3-paused-holder-%d", i), Key: fmt.Sprintf("integration/%s/%d", t.Name(), time.Now().UnixNano()),
			}
			a := startWorker(t, s3WorkerEnv, cfg)
			tokA := ready(t, a)
			pause(t, a)

			ctx, g := takeOver(t, etcd.Endpoints(), cfg.Lock, tokA)
			store, err := s3Resource(srv.Client(t), srv.Bucket, tt.fenced)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Put(ctx, store, cfg.Key, []byte("B, the new holder")); err != nil {
				t.Fatalf("B's write: got %v, want nil", err)
			}

			resumeToWrite(t, a)
			if got := next(t, a, "RESULT"); got != tt.wantResult {
				t.Fatalf("A's late write: got %q, want %q", got, tt.wantResult)
			}
			if got := next(t, a, "PUTS"); got != tt.wantPuts {
				t.Errorf("A's PUTs: got statuses %s, want %s", got, tt.wantPuts)
			}
			rec, err := store.Get(ctx, cfg.Key)
			if err != nil || string(rec.Value) != tt.wantValue {
				t.Fatalf("object: got %q (%v), want %q", rec.Value, err, tt.wantValue)
			}
		})
	}
}

// s3Resource returns the object store both holders write to: fence/s3, or
// for the control a store that writes whatever it is given.
func s3Resource(c *s3.Client, bucket string, fenced bool) (fence.Store, error) {
	if fenced {
		return s3fence.New(c, bucket)
	}
	return &s3LastWriterWins{c: c, bucket: bucket}, nil
}

// s3LastWriterWins stores values as plain objects with the token in
// metadata, and checks nothing: the control.
type s3LastWriterWins struct {
	c      *s3.Client
	bucket string
}

func (s *s3LastWriterWins) Put(ctx context.Context, k string, tok fence.Token, v []byte) error {
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &k, Body: bytes.NewReader(v),
		Metadata: map[string]string{"fence-token": tok.String()},
	})
	return err
}

func (s *s3LastWriterWins) Get(ctx context.Context, k string) (fence.Record, error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(k)})
	if err != nil {
		return fence.Record{}, err
	}
	defer out.Body.Close()
	v, err := io.ReadAll(out.Body)
	tok, _ := strconv.ParseInt(out.Metadata["fence-token"], 10, 64)
	return fence.Record{Value: v, Token: fence.Token(tok)}, err
}
