package gcsfence_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	gcsfence "github.com/fencelock/fencelock/fence/gcs"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// dup sends the next upload twice, when armed, and gives the client the
// second copy's reply (a proxy that retried an upstream whose reply it
// lost).
type dup struct {
	next  http.RoundTripper
	armed atomic.Bool
}

func (d *dup) wrap(next http.RoundTripper) http.RoundTripper { d.next = next; return d }

func (d *dup) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.URL.Path, "/upload/") || !d.armed.Swap(false) {
		return d.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	send := func() (*http.Response, error) {
		c := r.Clone(r.Context())
		c.Body = io.NopCloser(bytes.NewReader(body))
		c.ContentLength = int64(len(body))
		return d.next.RoundTrip(c)
	}
	first, err := send()
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, first.Body)
	first.Body.Close()
	return send()
}

// Update's final write delivered twice: the first copy lands, the second
// is refused (412, its generation is gone), Update reads again, finds its
// own token, and applies fn a second time.
func TestReviewUpdateDuplicatedWriteAppliesFnTwice(t *testing.T) {
	var d dup
	s := mustNew(t, client(t, d.wrap), gcsfence.WithPrefix(fencewant.Prefix(t)))
	fencewant.Put(t, s, "counter", 5, "0")
	var calls int
	var once sync.Once
	err := s.Update(t.Context(), "counter", 5, func(old fence.Record) ([]byte, error) {
		calls++
		once.Do(func() { d.armed.Store(true) })
		n, _ := strconv.Atoi(string(old.Value))
		return []byte(strconv.Itoa(n + 1)), nil
	})
	r, gerr := s.Get(t.Context(), "counter")
	if gerr != nil {
		t.Fatal(gerr)
	}
	if string(r.Value) != "1" {
		t.Fatalf("one Update of +1 (err %v, fn called %d times): counter is %q, want \"1\" (or an unknown outcome)", err, calls, r.Value)
	}
}

// The zero Store, and a nil context, are refused by every other method;
// CheckPreconditions panics on them.
func TestReviewCheckPreconditionsZeroStorePanics(t *testing.T) {
	for name, call := range map[string]func() error{
		"zero Store":  func() error { return (&gcsfence.Store{}).CheckPreconditions(context.Background()) },
		"nil Store":   func() error { return (*gcsfence.Store)(nil).CheckPreconditions(context.Background()) },
		"nil context": func() error { var nilCtx context.Context; return newStore(t).CheckPreconditions(nilCtx) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("CheckPreconditions on a %s panicked: %v", name, p)
				}
			}()
			t.Logf("err: %v", call())
		})
	}
}

type dialFails struct{ next http.RoundTripper }

func (d dialFails) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/upload/") {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	}
	return d.next.RoundTrip(r)
}

// An upload whose connection could not even be dialled was never sent,
// yet it is reported as an unknown outcome (fence/redis says "not sent").
func TestReviewDialErrorIsUnknown(t *testing.T) {
	client(t) // the probe, through a working client
	s := mustNew(t, client(t, func(next http.RoundTripper) http.RoundTripper { return dialFails{next} }), gcsfence.WithPrefix(fencewant.Prefix(t)))
	err := s.Put(t.Context(), "k", 1, []byte("v"))
	if errors.Is(err, fence.ErrUnknownOutcome) {
		t.Fatalf("Put whose connection was refused: %v, matching ErrUnknownOutcome", err)
	}
}

func TestReviewNilStoreObject(t *testing.T) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("(*Store)(nil).Object panicked: %v", p)
		}
	}()
	_ = (*gcsfence.Store)(nil).Object("k")
}
