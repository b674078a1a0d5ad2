package azblobfence_test

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/fencelock/fencelock/fence"
	azblobfence "github.com/fencelock/fencelock/fence/azblob"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
)

// faults loses the next reply, holds the next request or sends it twice,
// for the client's Put Blob requests (wrap installs it).
type faults = httpfault.Transport

// wrap makes f the client's transport, faulting its writes.
func wrap(f *faults) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		f.Next, f.Match = next, func(r *http.Request) bool { return r.Method == http.MethodPut }
		return f
	}
}

// key is a key named after the test.
func key(t *testing.T) string { return strings.ReplaceAll(t.Name(), "/", "-") }

// A Put whose reply is lost, with a newer token's write landed after it,
// says so (ErrUnknownOutcome), and was sent once, though the SDK retries
// a Put Blob that got no answer. The control lets the SDK resend: the
// copy, refused by the ETag of the write that landed, sends Put back to
// read, and it says stale of a write that landed.
func TestReplyLostSentOnce(t *testing.T) {
	p := fencewant.Prefix(t)
	run := func(t *testing.T) (uploads int, err error) {
		var f faults
		s := mustNew(t, client(t, wrap(&f)), azblobfence.WithPrefix(p))
		other := newStore(t, azblobfence.WithPrefix(p))
		k := key(t)
		fencewant.Put(t, s, k, 5, "a")
		f.LoseNextReply(func() { fencewant.Put(t, other, k, 9, "b") })
		before := f.Sent()
		err = s.Put(t.Context(), k, 7, []byte("c"))
		fencewant.Record(t, other, k, 9, "b")
		return f.Sent() - before, err
	}
	uploads, err := run(t)
	fencewant.Unknown(t, err, 7)
	if uploads != 1 {
		t.Fatalf("uploads sent for the Put: %d, want 1", uploads)
	}
	t.Run("control: resent", func(t *testing.T) {
		defer azblobfence.ResendForTest()()
		uploads, err := run(t)
		if !errors.Is(err, fence.ErrStale) || uploads < 2 {
			t.Fatalf("resent: got %v after %d uploads, want ErrStale of a put that landed, after 2 or more", err, uploads)
		}
	})
}

// A Put whose reply is lost, with nothing written after it, reads the
// blob back, finds its own write id there, and returns nil, in one
// upload.
func TestReplyLostLanded(t *testing.T) {
	var f faults
	s := mustNew(t, client(t, wrap(&f)), azblobfence.WithPrefix(fencewant.Prefix(t)))
	fencewant.Put(t, s, "k", 5, "a")
	f.LoseNextReply(func() {})
	before := f.Sent()
	if err := s.Put(t.Context(), "k", 7, []byte("c")); err != nil {
		t.Fatalf("Put whose reply was lost: got %v, want nil (its id is in the blob)", err)
	}
	if n := f.Sent() - before; n != 1 {
		t.Fatalf("uploads sent for the Put: %d, want 1", n)
	}
	fencewant.Record(t, s, "k", 7, "c")
}

// A write held up in the network until a newer token has written is
// refused when it arrives (its ETag is gone), then read again and refused
// for its token; nothing of it lands. The control sends a plain upload of
// the same bytes and metadata the same way, with no condition: it lands
// over the newer write.
func TestLateRequestRefused(t *testing.T) {
	var f faults
	p := fencewant.Prefix(t)
	c := client(t, wrap(&f))
	s := mustNew(t, c, azblobfence.WithPrefix(p))
	other := newStore(t, azblobfence.WithPrefix(p))
	fencewant.Put(t, s, "k", 5, "a")
	held, release := f.HoldNextRequest()
	errc := make(chan error, 1)
	go func() { errc <- s.Put(t.Context(), "k", 7, []byte("late")) }()
	<-held
	fencewant.Put(t, other, "k", 9, "b")
	close(release)
	fencewant.Stale(t, <-errc, 7, 9)
	fencewant.Record(t, other, "k", 9, "b")

	// The control: the late write as a plain upload of the blob a Store
	// would write (its metadata taken from a Store's own write of token 7
	// under another name), with no condition, lands over token 9's.
	fencewant.Put(t, s, "template", 7, "late")
	props, err := c.NewBlockBlobClient(p+"template").GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	held, release = f.HoldNextRequest()
	go func() {
		_, err := c.NewBlockBlobClient(p+"k").Upload(t.Context(), streaming.NopCloser(bytes.NewReader([]byte("late"))),
			&blockblob.UploadOptions{Metadata: props.Metadata})
		errc <- err
	}()
	<-held
	fencewant.Put(t, other, "k", 10, "c")
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	fencewant.Record(t, other, "k", 7, "late")
}

// An Update whose final write is delivered twice (the first copy lands,
// the second is refused by the first's ETag, and its reply is the one
// the client gets) applies its function once: the write's id in the blob
// says it landed. The control does not look for the id: the refusal
// reads as another writer's change, and the next round applies the
// function again over the write that landed.
func TestDuplicatedWriteOnce(t *testing.T) {
	p := fencewant.Prefix(t)
	run := func(t *testing.T) (counter int, err error) {
		var f faults
		s := mustNew(t, client(t, wrap(&f)), azblobfence.WithPrefix(p))
		k := key(t)
		fencewant.Put(t, s, k, 5, "10")
		if _, err := s.GetForUpdate(t.Context(), k, 7); err != nil {
			t.Fatal(err) // claimed: the Update's next write is its final one
		}
		f.DuplicateNextRequest()
		err = s.Update(t.Context(), k, 7, func(old fence.Record) ([]byte, error) {
			n, err := strconv.Atoi(string(old.Value))
			return []byte(strconv.Itoa(n + 1)), err
		})
		r, gerr := s.Get(t.Context(), k)
		if gerr != nil {
			t.Fatal(gerr)
		}
		counter, _ = strconv.Atoi(string(r.Value))
		return counter, err
	}
	if n, err := run(t); err != nil || n != 11 {
		t.Fatalf("Update +1 of 10, its write delivered twice: got %d, %v; want 11, nil", n, err)
	}
	t.Run("control: own write not recognised", func(t *testing.T) {
		defer azblobfence.IgnoreOwnWriteForTest()()
		if n, err := run(t); err != nil || n != 12 {
			t.Fatalf("got %d, %v; want 12, nil (the function applied twice)", n, err)
		}
	})
}

// A Put whose request is delivered twice returns nil and leaves its
// record: the refusal of the second copy reads back as its own write.
func TestDuplicatedPut(t *testing.T) {
	var f faults
	s := mustNew(t, client(t, wrap(&f)), azblobfence.WithPrefix(fencewant.Prefix(t)))
	fencewant.Put(t, s, "k", 5, "a")
	f.DuplicateNextRequest()
	before := f.Sent()
	if err := s.Put(t.Context(), "k", 7, []byte("b")); err != nil {
		t.Fatalf("Put delivered twice: got %v, want nil", err)
	}
	if n := f.Sent() - before; n != 2 {
		t.Fatalf("uploads: %d, want 2 (the copies, and no write after them)", n)
	}
	fencewant.Record(t, s, "k", 7, "b")
}
