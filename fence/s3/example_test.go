package s3fence_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fencelock/fencelock/fence"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/testkit/s3test"
)

// Example builds a client for an S3-compatible server (versitygw, MinIO,
// Ceph RGW, ...), creates a bucket, and writes and reads back an object
// with a fencing token. For AWS itself, build the client from the
// environment instead:
//
//	cfg, err := config.LoadDefaultConfig(ctx) // github.com/aws/aws-sdk-go-v2/config
//	client := s3.NewFromConfig(cfg)
//
// The bucket needs no versioning. The Store's first write leaves an object
// under [s3fence.DefaultProbeKey] in it: the conditional-write check
// ([s3fence.Store.CheckConditionalWrites]) writes it to make sure the
// server refuses conditional writes whose condition fails; it holds no
// record and may be deleted.
func Example() {
	ctx := context.Background()
	// Where the server is and its keys; here, the versitygw the tests run.
	endpoint, accessKey, secretKey := exampleServer() // e.g. "http://127.0.0.1:7070", ...

	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,        // http://host/bucket/key: no DNS name per bucket needed
		Region:       "us-east-1", // the signing region; most S3-compatible servers take any
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	})
	bucket := exampleBucket() // e.g. "invoices"
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		log.Fatal(err)
	}
	defer removeBucket(client, bucket)

	store, err := s3fence.New(client, bucket)
	if err != nil {
		log.Fatal(err)
	}
	// 33 is the token of the lock this process holds, e.g. lock.Token().
	if err := store.Put(ctx, "invoice-42.json", 33, []byte(`{"total": 120}`)); err != nil {
		log.Fatal(err)
	}
	rec, err := store.Get(ctx, "invoice-42.json")
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

// ExampleStore_GetForUpdate reads before a write. Holder A (token 33)
// counted 1 and is paused before writing its 2; B (token 34) takes over,
// reads, and A's write arrives between B's read and B's write. Read with
// GetForUpdate, the key is claimed for 34 as B reads it, and A's late
// write is refused; read with Get, it would land and B's 2 would then
// overwrite it: one of the two increments lost.
func ExampleStore_GetForUpdate() {
	ctx := context.Background()
	srv := s3test.Shared()
	clientA, closeA := srv.NewClient()
	defer closeA()
	clientB, closeB := srv.NewClient()
	defer closeB()
	a, _ := s3fence.New(clientA, srv.Bucket)
	b, _ := s3fence.New(clientB, srv.Bucket)
	k := exampleKey("visits")
	_ = a.Put(ctx, k, 33, []byte("1"))

	rec, err := b.GetForUpdate(ctx, k, 34) // B reads 1, and claims the key
	if err != nil {
		log.Fatal(err)
	}
	err = a.Put(ctx, k, 33, []byte("2")) // A's late write
	fmt.Println("A's late write refused:", errors.Is(err, fence.ErrStale))
	n, _ := strconv.Atoi(string(rec.Value))
	if err := b.Put(ctx, k, rec.Token, strconv.AppendInt(nil, int64(n+1), 10)); err != nil {
		log.Fatal(err)
	}
	rec, _ = b.Get(ctx, k)
	fmt.Printf("visits %s, token %d\n", rec.Value, rec.Token)
	// Output:
	// A's late write refused: true
	// visits 2, token 34
}

// ExampleStore_Update counts with a read-modify-write: the claim, the
// read, fn and a write conditional on what was read, retried if a writer
// with the same token changed the object in between.
func ExampleStore_Update() {
	ctx := context.Background()
	srv := s3test.Shared()
	client, closeIdle := srv.NewClient()
	defer closeIdle()
	store, err := s3fence.New(client, srv.Bucket)
	if err != nil {
		log.Fatal(err)
	}
	k := exampleKey("visits")
	increment := func(old fence.Record) ([]byte, error) {
		n, err := strconv.Atoi(cmp.Or(string(old.Value), "0")) // no value yet: the zero Record
		return strconv.AppendInt(nil, int64(n+1), 10), err     // an error writes nothing
	}
	for range 3 {
		// 33 is the token of the lock this process holds, e.g. lock.Token().
		if err := store.Update(ctx, k, 33, increment); err != nil {
			log.Fatal(err)
		}
	}
	rec, err := store.Get(ctx, k)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("visits %s, token %d\n", rec.Value, rec.Token)
	// Output: visits 3, token 33
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

// newS3Client returns a client for an S3-compatible server that is not AWS
// (versitygw, MinIO, Ceph RGW, Garage), at an endpoint such as
// "http://localhost:7070", with static credentials. docs/s3.md shows this
// function as it is here.
func newS3Client(endpoint, region, accessKey, secretKey string, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true, // the bucket in the path, not in the host name
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	}, optFns...)
}

// createBucket creates bucket unless it exists already (versioning is not
// needed). docs/s3.md shows this function as it is here.
func createBucket(ctx context.Context, client *s3.Client, bucket string) error {
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if errors.As(err, &owned) {
		return nil
	}
	return err
}

// ExampleNew_compatibleServer sets up a client for an S3-compatible server
// with its endpoint and static credentials, makes sure the bucket exists,
// and writes. The Store's first write leaves the probe object
// DefaultProbeKey in the bucket: the check that the server honours
// conditional writes.
func ExampleNew_compatibleServer() {
	ctx := context.Background()
	srv := s3test.Shared() // stands for a server of yours
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := newS3Client(srv.Endpoint, srv.Region, srv.AccessKey, srv.SecretKey,
		func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: tr} })
	if err := createBucket(ctx, client, srv.Bucket); err != nil {
		log.Fatal(err)
	}

	store, err := s3fence.New(client, srv.Bucket)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Put(ctx, exampleKey("hello.txt"), 33, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	_, err = client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(s3fence.DefaultProbeKey)})
	fmt.Println("probe object:", s3fence.DefaultProbeKey, err == nil)
	// Output: probe object: fencelock-probe/conditional-writes true
}

// exampleKey returns name under a prefix no other run uses, so the examples
// also work against a long-lived bucket.
func exampleKey(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s3fence-example/" + hex.EncodeToString(b[:]) + "/" + name
}

// exampleServer returns the endpoint and keys of the S3 server the tests
// run (an existing endpoint's, when FENCELOCK_S3_BUCKET selects one: the
// example then needs static keys and the right to create buckets).
func exampleServer() (endpoint, accessKey, secretKey string) {
	srv := s3test.Shared()
	return srv.Endpoint, srv.AccessKey, srv.SecretKey
}

// exampleBucket returns a bucket name no other run uses.
func exampleBucket() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fencelock-example-" + hex.EncodeToString(b[:])
}

// removeBucket deletes bucket and the objects in it, so that the example
// leaves nothing on a long-lived endpoint.
func removeBucket(client *s3.Client, bucket string) {
	ctx := context.Background()
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range list.Contents {
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		log.Fatal(err)
	}
}
