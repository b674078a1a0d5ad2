package gcsfence_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
	"github.com/fencelock/fencelock/internal/testkit/httpfault"
)

// A Put whose reply is lost says so (ErrUnknownOutcome) and was sent once,
// though the library retries a write with a generation precondition, even
// when a newer token's write lands in between. The control lets the
// library resend: the copy, refused by the precondition, sends Put back to
// read, and it says stale of a write that landed.
// faults loses the next reply or holds the next request of an upload (wrap installs it).
type faults = httpfault.Transport

// wrap makes f the client's transport, faulting its uploads.
func wrap(f *faults) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		f.Next, f.Match = next, func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/upload/") }
		return f
	}
}

func TestReplyLostSentOnce(t *testing.T) {
	p := fencewant.Prefix(t)
	run := func(t *testing.T) (uploads int, err error) {
		var f faults
		s := mustNew(t, client(t, wrap(&f)), gcsfence.WithPrefix(p))
		other := newStore(t, gcsfence.WithPrefix(p))
		k := strings.ReplaceAll(t.Name(), "/", "-")
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
		defer gcsfence.ResendForTest()()
		uploads, err := run(t)
		if !errors.Is(err, fence.ErrStale) || uploads < 2 {
			t.Fatalf("resent: got %v after %d uploads, want ErrStale of a put that landed, after 2 or more", err, uploads)
		}
	})
}

// A write held up in the network until a newer token has written is
// refused when it arrives (its generation is gone), then read again and
// refused for its token; nothing of it lands. The control sends a plain
// upload of the same bytes the same way: it lands over the newer write.
func TestLateRequestRefused(t *testing.T) {
	var f faults
	p := fencewant.Prefix(t)
	fc := client(t, wrap(&f))
	s := mustNew(t, fc, gcsfence.WithPrefix(p))
	other := newStore(t, gcsfence.WithPrefix(p))
	fencewant.Put(t, s, "k", 5, "a")
	held, release := f.HoldNextRequest()
	errc := make(chan error, 1)
	go func() { errc <- s.Put(t.Context(), "k", 7, []byte("late")) }()
	<-held
	fencewant.Put(t, other, "k", 9, "b")
	close(release)
	fencewant.Stale(t, <-errc, 7, 9)
	fencewant.Record(t, other, "k", 9, "b")

	// The control: the same late write as a plain upload of the object a
	// Store would write (taken from a Store's own write of token 7 under
	// another name), with no precondition, lands over token 9's.
	fencewant.Put(t, s, "template", 7, "late")
	r, err := fc.Bucket(gcstest.Bucket).Object(p + "template").NewReader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	held, release = f.HoldNextRequest()
	go func() {
		w := fc.Bucket(gcstest.Bucket).Object(p + "k").NewWriter(t.Context())
		w.ChunkSize = 0
		_, err := w.Write(body)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
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
