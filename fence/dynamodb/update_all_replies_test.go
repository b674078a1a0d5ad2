package dynamofence_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// isTransact reports whether r is a TransactWriteItems request.
func isTransact(r *http.Request) bool {
	return strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems")
}

// inProgress is a RoundTripper that delivers each TransactWriteItems to the
// server and answers the caller as DynamoDB answers a second copy of a
// request whose first copy (same client request token) is still running:
// 400 TransactionInProgressException. That is what a proxy or load
// balancer that resends a request whose connection broke hands back.
type inProgress struct{ next http.RoundTripper }

func (p inProgress) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isTransact(r) {
		return p.next.RoundTrip(r)
	}
	resp, err := p.next.RoundTrip(r) // the first copy: it runs, and lands
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return refused(r, "TransactionInProgressException", "Transaction is ongoing for the transaction token"), nil
}

// refused is DynamoDB's 400 answer to r with the exception typ.
func refused(r *http.Request, typ, msg string) *http.Response {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#` + typ + `","message":"` + msg + `"}`
	return &http.Response{
		StatusCode: 400, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"test"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

// TransactionInProgressException is DynamoDB's answer to a request whose
// client request token belongs to a transaction that is still running:
// another copy of this very write is in flight and may commit. It is an
// unknown outcome (or, once read back, success), not a refusal: here the
// write landed.
func TestUpdateAllTransactionInProgressIsUnknown(t *testing.T) {
	needTransactions(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: inProgress{tr}} }))
	a, b := twoAccounts(t, s)
	err := s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, nil))
	fencewant.Record(t, newStore(t), a, 7, "90") // the write landed
	fencewant.Record(t, newStore(t), b, 7, "110")
	if err != nil && !isUnknown(err) {
		t.Fatalf("UpdateAll answered TransactionInProgressException for a write that landed: got %v, want nil or an error matching fence.ErrUnknownOutcome", err)
	}
}

func isUnknown(err error) bool {
	var u *fence.UnknownOutcomeError
	return err != nil && errors.As(err, &u)
}

// secondReply is a RoundTripper that delivers each TransactWriteItems
// twice, runs between (once) a write of another process, and answers with
// the second copy's reply: a proxy that resent a request whose first
// reply it lost.
type secondReply struct {
	next    http.RoundTripper
	between func()
	done    bool
}

func (p *secondReply) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isTransact(r) || p.done {
		return p.next.RoundTrip(r)
	}
	p.done = true
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	send := func() (*http.Response, error) {
		c := r.Clone(r.Context())
		c.Body = io.NopCloser(bytes.NewReader(body))
		return p.next.RoundTrip(c)
	}
	first, err := send()
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, first.Body)
	first.Body.Close()
	if f := p.between; f != nil {
		p.between = nil
		f()
	}
	return send()
}

// A transfer's write delivered twice, answered with the second copy's
// reply, after the same holder changed one of the two items in between (a
// single-key Update, which stamps the item with its own write id), lands
// once: the write's id on a alone proves the transaction committed (its
// items are written all or none), so UpdateAll does not read again and
// move the money a second time.
// (On DynamoDB itself the client request token answers the copy within
// its 10-minute window; the emulator, and a copy after the window, do
// not.)
func TestUpdateAllCopyAnsweredAfterSameTokenUpdate(t *testing.T) {
	needTransactions(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	sr := &secondReply{next: tr}
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: sr} }))
	other := newStore(t)
	a, b := twoAccounts(t, s)
	sr.between = func() {
		// The same holder (token 7) rewrites b as it is (a no-op Update,
		// which still stamps b with its own write id).
		if err := other.Update(t.Context(), b, 7, func(r fence.Record) ([]byte, error) {
			return r.Value, nil
		}); err != nil {
			t.Errorf("the same holder's Update of b: %v", err)
		}
	}
	calls := 0
	fn := move(a, b, 10, nil)
	err := s.UpdateAll(t.Context(), both(a, b, 7), func(old map[string]fence.Record) (map[string][]byte, error) {
		calls++
		return fn(old)
	})
	if err != nil && !isUnknown(err) {
		t.Fatalf("UpdateAll: %v", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times: the transfer was written again after its first copy landed", calls)
	}
	fencewant.Record(t, other, a, 7, "90")
	fencewant.Record(t, other, b, 7, "110")
}

// The same copy answered second, with nothing in between, lands once on
// the emulator too: minidyn cancels a transaction at its first failed item
// and gives "None" (no item) for the others, so only the first item
// written shows the write's id. (TestUpdateAllDeliveredTwice answers with
// the first copy's reply and never reaches the cancellation.)
func TestUpdateAllCopyAnsweredSecondPlain(t *testing.T) {
	needTransactions(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: &secondReply{next: tr}} }))
	a, b := twoAccounts(t, s)
	if err := s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, nil)); err != nil {
		t.Fatalf("UpdateAll: %v", err)
	}
	fencewant.Record(t, s, a, 7, "90")
	fencewant.Record(t, s, b, 7, "110")
}

// conflictOnce answers the first UpdateItem once armed (every one, if
// every), unsent, as DynamoDB answers a write on an item that another
// transaction is writing at that moment: 400 TransactionConflictException.
// n counts the answers.
type conflictOnce struct {
	next  http.RoundTripper
	every bool // set once before use
	armed atomic.Bool
	n     atomic.Int64
}

func (p *conflictOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") || !p.armed.Load() ||
		(!p.every && !p.armed.CompareAndSwap(true, false)) {
		return p.next.RoundTrip(r)
	}
	p.n.Add(1)
	return refused(r, "TransactionConflictException", "Transaction is ongoing for the item"), nil
}

// The same holder's writers at once (fencetest's UpdateAllConcurrent: "an
// UpdateAll may fail only with ErrConflict"): on DynamoDB a claim's
// UpdateItem on an item that another UpdateAll's TransactWriteItems is
// writing right then is refused with TransactionConflictException.
// UpdateAll reads again, as it does when its own transaction meets the
// conflict, and says ErrConflict only after fence.UpdateAttempts.
func TestUpdateAllClaimTransactionConflict(t *testing.T) {
	needTransactions(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	co := &conflictOnce{next: tr}
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: co} }))
	a, b := twoAccounts(t, newStore(t))
	co.armed.Store(true)
	err := s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, nil))
	if err != nil && !errors.Is(err, fence.ErrConflict) {
		t.Fatalf("UpdateAll whose claim met another transaction on its item: got %v, want nil (read again) or an error matching fence.ErrConflict", err)
	}
}

// Update's claim meets the same conflict, and reads again too.
func TestUpdateClaimTransactionConflict(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	co := &conflictOnce{next: tr}
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: co} }))
	a, _ := twoAccounts(t, newStore(t))
	co.armed.Store(true)
	if err := s.Update(t.Context(), a, 7, func(r fence.Record) ([]byte, error) { return []byte("90"), nil }); err != nil {
		t.Fatalf("Update whose claim met another transaction on its item: got %v, want nil (read again)", err)
	}
	fencewant.Record(t, s, a, 7, "90")
}

// A claim that meets the conflict at every attempt says ErrConflict, after
// fence.UpdateAttempts claims.
func TestUpdateAllClaimTransactionConflictEvery(t *testing.T) {
	needTransactions(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	co := &conflictOnce{next: tr, every: true}
	s := mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: co} }))
	a, b := twoAccounts(t, newStore(t))
	co.armed.Store(true)
	err := s.UpdateAll(t.Context(), both(a, b, 7), move(a, b, 10, nil))
	if !errors.Is(err, fence.ErrConflict) {
		t.Fatalf("UpdateAll whose claims always meet another transaction: got %v, want an error matching fence.ErrConflict", err)
	}
	if n := co.n.Load(); n < fence.UpdateAttempts {
		t.Errorf("claims refused: got %d, want at least %d (one per attempt)", n, fence.UpdateAttempts)
	}
	fencewant.Record(t, s, a, 5, "100")
}
