package s3fence_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// Example writes and reads back an object with a fencing token.
func Example() {
	ctx := context.Background()
	// In a program: cfg, _ := config.LoadDefaultConfig(ctx); client := s3.NewFromConfig(cfg)
	srv := s3test.Shared()
	client, closeIdle := srv.NewClient()
	defer closeIdle()

	store, err := s3fence.New(client, srv.Bucket)
	if err != nil {
		log.Fatal(err)
	}
	k := exampleKey("invoice-42.json")
	// 33 is the token of the lock this process holds, e.g. lock.Token().
	if err := store.Put(ctx, k, 33, []byte(`{"total": 120}`)); err != nil {
		log.Fatal(err)
	}
	rec, err := store.Get(ctx, k)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, token %d\n", rec.Value, rec.Token)
	// Output: {"total": 120}, token 33
}

// ExampleStore_Put_stale shows a paused holder's late write refused by S3
// after a newer holder has written.
func ExampleStore_Put_stale() {
	ctx := context.Background()
	srv := s3test.Shared()
	clientA, closeA := srv.NewClient() // two processes, each with its own client
	defer closeA()
	clientB, closeB := srv.NewClient()
	defer closeB()
	a, _ := s3fence.New(clientA, srv.Bucket)
	b, _ := s3fence.New(clientB, srv.Bucket)
	k := exampleKey("report.csv")

	_ = a.Put(ctx, k, 33, []byte("A's first draft"))   // A holds the lock with token 33...
	_ = b.Put(ctx, k, 34, []byte("B's report"))        // ...is paused; B takes over with 34...
	err := a.Put(ctx, k, 33, []byte("A's late write")) // ...and A wakes up.

	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("refused: token %d, the object is at %d\n", stale.Token, stale.Current)
	}
	rec, _ := b.Get(ctx, k)
	fmt.Printf("%s, token %d\n", rec.Value, rec.Token)
	// Output:
	// refused: token 33, the object is at 34
	// B's report, token 34
}

// ExampleStore_PutReader streams a large value from a file (any
// io.ReadSeeker) and reads part of it back. Objects above the multipart
// threshold (5 MiB here, 5 GiB by default) go as fenced multipart uploads.
func ExampleStore_PutReader() {
	ctx := context.Background()
	srv := s3test.Shared()
	client, closeIdle := srv.NewClient()
	defer closeIdle()
	store, err := s3fence.New(client, srv.Bucket, s3fence.WithMultipartThreshold(5<<20), s3fence.WithPartSize(5<<20))
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.CreateTemp("", "fencelock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(bytes.Repeat([]byte("0123456789"), 1<<20)); err != nil { // 10 MiB
		log.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		log.Fatal(err)
	}

	k := exampleKey("dump.bin")
	if err := store.PutReader(ctx, k, 33, f); err != nil { // two 5 MiB parts
		log.Fatal(err)
	}
	r, err := store.OpenRange(ctx, k, 5<<20, 10)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	part, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, token %d\n", part, r.Token())
	// Output: 0123456789, token 33
}

// exampleKey returns name under a prefix no other run uses, so the examples
// also work against a long-lived bucket.
func exampleKey(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s3fence-example/" + hex.EncodeToString(b[:]) + "/" + name
}
