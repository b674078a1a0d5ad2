package gcsfence_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/gcstest"
)

// faults is an HTTP transport with two faults to arm on the next upload: a
// reply that is lost (the server stored the object; the client sees a
// broken connection), and a request held before it is sent.
type faults struct {
	next    http.RoundTripper
	mu      sync.Mutex
	lose    func()
	held    chan struct{}
	hold    chan struct{}
	uploads int
}

func (f *faults) wrap(next http.RoundTripper) http.RoundTripper { f.next = next; return f }

func (f *faults) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.URL.Path, "/upload/") {
		return f.next.RoundTrip(r)
	}
	f.mu.Lock()
	lose, held, hold := f.lose, f.held, f.hold
	f.lose, f.held, f.hold = nil, nil, nil
	f.uploads++
	f.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	resp, err := f.next.RoundTrip(r)
	if lose != nil && err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lose()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

func (f *faults) loseNextReply(then func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose = then
}

func (f *faults) holdNextRequest() (held, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.hold = make(chan struct{}), make(chan struct{})
	return f.held, f.hold
}

// A Put whose reply is lost says so (ErrUnknownOutcome) and was sent once,
// though the library retries a write with a generation precondition, even
// when a newer token's write lands in between. The control lets the
// library resend: the copy, refused by the precondition, sends Put back to
// read, and it says stale of a write that landed.
func TestReplyLostSentOnce(t *testing.T) {
	p := prefix(t)
	run := func(t *testing.T) (uploads int, err error) {
		var f faults
		s := mustNew(t, client(t, f.wrap), gcsfence.WithPrefix(p))
		other := newStore(t, gcsfence.WithPrefix(p))
		k := strings.ReplaceAll(t.Name(), "/", "-")
		mustPut(t, s, k, 5, "a")
		f.loseNextReply(func() { mustPut(t, other, k, 9, "b") })
		before := f.uploads
		err = s.Put(t.Context(), k, 7, []byte("c"))
		wantRecord(t, other, k, 9, "b")
		return f.uploads - before, err
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
	p := prefix(t)
	fc := client(t, f.wrap)
	s := mustNew(t, fc, gcsfence.WithPrefix(p))
	other := newStore(t, gcsfence.WithPrefix(p))
	mustPut(t, s, "k", 5, "a")
	held, release := f.holdNextRequest()
	errc := make(chan error, 1)
	go func() { errc <- s.Put(t.Context(), "k", 7, []byte("late")) }()
	<-held
	mustPut(t, other, "k", 9, "b")
	close(release)
	fencewant.Stale(t, <-errc, 7, 9)
	wantRecord(t, other, "k", 9, "b")

	// The control: the same late write as a plain upload of the object a
	// Store would write (taken from a Store's own write of token 7 under
	// another name), with no precondition, lands over token 9's.
	mustPut(t, s, "template", 7, "late")
	r, err := fc.Bucket(gcstest.Bucket).Object(p + "template").NewReader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	held, release = f.holdNextRequest()
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
	mustPut(t, other, "k", 10, "c")
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	wantRecord(t, other, "k", 7, "late")
}
