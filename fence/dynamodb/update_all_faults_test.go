package dynamofence_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// twoAccounts returns two keys no other test uses, holding 100 each with
// token 5.
func twoAccounts(t *testing.T, s *dynamofence.Store) (a, b string) {
	t.Helper()
	p := fencewant.Prefix(t)
	a, b = p+"a", p+"b"
	fencewant.Put(t, s, a, 5, "100")
	fencewant.Put(t, s, b, 5, "100")
	return a, b
}

// move is an UpdateAllFunc that moves n from a to b, and calls before
// (if not nil) on its first call.
func move(a, b string, n int, before func()) fence.UpdateAllFunc {
	calls := 0
	return func(old map[string]fence.Record) (map[string][]byte, error) {
		if calls++; calls == 1 && before != nil {
			before()
		}
		x, err := strconv.Atoi(string(old[a].Value))
		if err != nil {
			return nil, err
		}
		y, err := strconv.Atoi(string(old[b].Value))
		if err != nil {
			return nil, err
		}
		return map[string][]byte{a: []byte(strconv.Itoa(x - n)), b: []byte(strconv.Itoa(y + n))}, nil
	}
}

func both(a, b string, token fence.Token) []fence.Claim {
	return []fence.Claim{{Resource: a, Token: token}, {Resource: b, Token: token}}
}

// An UpdateAll whose write loses its reply says so (ErrUnknownOutcome)
// and was sent once, though the SDK resends requests, even when a newer
// holder updates both items in between (keeping their values, so the
// transfer shows): both legs landed, once. The control lets the SDK
// resend: against a server that does not keep the client request token
// (the emulator), the copy is refused by the newer floors, finds the
// write's id on no item (the newer holder's writes replaced it), and says
// stale of a transfer that landed.
func TestUpdateAllReplyLostSentOnce(t *testing.T) {
	needTransactions(t)
	run := func(t *testing.T) (sent int, err error) {
		var f faults
		s := mustNew(t, faultyClient(t, &f))
		other := newStore(t)
		a, b := twoAccounts(t, s)
		before := 0
		err = s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, func() {
			before = f.Sent()
			f.LoseNextReply(func() { keep(t, other, 9, a, b) })
		}))
		fencewant.Record(t, other, a, 9, "90")
		fencewant.Record(t, other, b, 9, "110")
		return f.Sent() - before, err
	}
	sent, err := run(t)
	fencewant.Unknown(t, err, 7)
	if sent != 1 {
		t.Fatalf("requests sent for the write: %d, want 1", sent)
	}
	t.Run("control: resent", func(t *testing.T) {
		defer dynamofence.ResendForTest()()
		sent, err := run(t)
		if !errors.Is(err, fence.ErrStale) || sent < 2 {
			t.Fatalf("resent: got %v after %d requests, want ErrStale of a transfer that landed, after 2 or more", err, sent)
		}
	})
}

// keep updates each key with token, keeping its value.
func keep(t *testing.T, s *dynamofence.Store, token fence.Token, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := s.Update(t.Context(), k, token, func(r fence.Record) ([]byte, error) { return r.Value, nil }); err != nil {
			t.Errorf("Update(%q) with token %d: %v", k, token, err)
		}
	}
}

// twice is a RoundTripper that delivers each TransactWriteItems request
// twice, one copy after the other, and answers with the first's reply.
type twice struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (tw *twice) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
		return tw.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	send := func() (*http.Response, error) {
		c := r.Clone(r.Context())
		c.Body = io.NopCloser(bytes.NewReader(body))
		return tw.next.RoundTrip(c)
	}
	resp, err := send()
	if err != nil {
		return nil, err
	}
	tw.n.Add(1)
	if second, err := send(); err == nil {
		_, _ = io.Copy(io.Discard, second.Body)
		second.Body.Close()
	}
	return resp, nil
}

// A transfer's write delivered twice lands once: the second copy finds the
// versions moved (or, on DynamoDB, its client request token used), and
// UpdateAll, which sees the first copy's reply, says success.
func TestUpdateAllDeliveredTwice(t *testing.T) {
	needTransactions(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	tw := &twice{next: tr}
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tw} }))
	a, b := twoAccounts(t, s)
	if err := s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, nil)); err != nil {
		t.Fatalf("UpdateAll whose write was delivered twice: got %v, want nil", err)
	}
	if n := tw.n.Load(); n != 1 {
		t.Fatalf("writes delivered twice: got %d, want 1", n)
	}
	fencewant.Record(t, s, a, 7, "90")
	fencewant.Record(t, s, b, 7, "110")
}

// A transfer's write held up in the network while another transfer lands
// is refused as a whole when it arrives: after the same token's, it reads
// again and moves the money once; after a newer token's, it gives a
// *fence.StaleError and nothing of it lands.
func TestUpdateAllLateWrite(t *testing.T) {
	needTransactions(t)
	for _, tt := range []struct {
		name  string
		token fence.Token
		a, b  string
		calls int
	}{
		{"after the same holder's transfer", 7, "89", "111", 2},
		{"after a newer holder's transfer", 9, "99", "101", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f faults
			s := mustNew(t, faultyClient(t, &f))
			other := newStore(t)
			a, b := twoAccounts(t, s)
			calls := 0
			fn := move(a, b, 10, func() {
				held, release := f.HoldNextRequest()
				go func() {
					<-held
					if err := other.UpdateAll(t.Context(), both(a, b, tt.token), move(a, b, 1, nil)); err != nil {
						t.Errorf("the other transfer: %v", err)
					}
					close(release)
				}()
			})
			err := s.UpdateAll(t.Context(), both(a, b, 7), func(old map[string]fence.Record) (map[string][]byte, error) {
				calls++
				return fn(old)
			})
			if tt.token == 7 && err != nil {
				t.Fatalf("UpdateAll whose write was held while the same token wrote: got %v, want nil after reading again", err)
			}
			if tt.token == 9 {
				fencewant.Stale(t, err, 7, 9)
			}
			if calls != tt.calls {
				t.Errorf("calls of fn: got %d, want %d", calls, tt.calls)
			}
			fencewant.Record(t, other, a, tt.token, tt.a)
			fencewant.Record(t, other, b, tt.token, tt.b)
		})
	}
}

// narrow is a Client with the three methods the interface names and no
// BatchGetItem: UpdateAll reads its items one GetItem each.
type narrow struct{ dynamofence.Client }

// TestConformanceNarrowClient runs the suite through a Client without
// BatchGetItem.
func TestConformanceNarrowClient(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fence.Store { return conformant(t, mustNew(t, narrow{client(t)})) })
}
