package dynamofence_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// copies is a transport that, when armed, delivers the next request twice
// with another client's write in between: the first copy, between, then
// the second, whose reply the client gets. When late, the first copy is
// held back instead (its delivery is sendLate, for after the call).
type copies struct {
	next     http.RoundTripper
	armed    atomic.Bool
	between  func()
	late     bool
	sendLate func() (*http.Response, error) // set by the armed request, when late
}

func (c *copies) RoundTrip(r *http.Request) (*http.Response, error) {
	if !c.armed.Swap(false) {
		return c.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	send := func() (*http.Response, error) {
		cp := r.Clone(r.Context())
		cp.Body = io.NopCloser(bytes.NewReader(body))
		return c.next.RoundTrip(cp)
	}
	if c.late {
		c.sendLate = func() (*http.Response, error) {
			cp, _ := http.NewRequest(r.Method, r.URL.String(), bytes.NewReader(body))
			cp.Header = r.Header.Clone()
			return c.next.RoundTrip(cp)
		}
	} else {
		first, err := send()
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, first.Body)
		first.Body.Close()
	}
	c.between()
	return send()
}

// storeThrough returns a store whose requests go through c, then through
// noItem when bare (a server that returns no item on a failed condition).
func storeThrough(t *testing.T, c *copies, bare bool) *dynamofence.Store {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c.next = tr
	if bare {
		c.next = noItem{tr}
	}
	return mustNew(t, client(t, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: c} }))
}

// Update's write delivered twice with a newer holder's write in between
// (on a server that returns the item with the refusal, and on one that
// does not, whose item Update reads back): fn runs once either way. A
// newer Put leaves the write's id on the item (Put sets none), so the
// write is known to have landed: nil. A newer Update replaces the id, and
// the floor above the token is all Update sees: a *StaleError, never a
// second round of fn under a floor that is no longer its token's.
func TestUpdateDeliveredTwiceNewerBetween(t *testing.T) {
	for _, bare := range []bool{false, true} {
		for _, tt := range []struct {
			name  string
			newer func(t *testing.T, other *dynamofence.Store, k string)
			stale bool
		}{
			{"newer Put", func(t *testing.T, other *dynamofence.Store, k string) { fencewant.Put(t, other, k, 9, "b") }, false},
			{"newer Update", func(t *testing.T, other *dynamofence.Store, k string) {
				if err := other.Update(t.Context(), k, 9, func(fence.Record) ([]byte, error) { return []byte("b"), nil }); err != nil {
					t.Fatal(err)
				}
			}, true},
		} {
			t.Run(map[bool]string{false: "item returned", true: "no item returned"}[bare]+"/"+tt.name, func(t *testing.T) {
				other := newStore(t)
				k := fencewant.Prefix(t) + "counter"
				c := &copies{between: func() { tt.newer(t, other, k) }}
				s := storeThrough(t, c, bare)
				fencewant.Put(t, s, k, 5, "0")
				calls := 0
				err := s.Update(t.Context(), k, 5, func(old fence.Record) ([]byte, error) {
					calls++
					c.armed.Store(true) // the next request is this attempt's write
					n, _ := strconv.Atoi(string(old.Value))
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if tt.stale {
					fencewant.Stale(t, err, 5, 9)
				} else if err != nil {
					t.Fatalf("Update whose write landed before a newer Put: got %v, want nil", err)
				}
				if calls != 1 {
					t.Errorf("fn called %d times, want 1", calls)
				}
				fencewant.Record(t, s, k, 9, "b")
			})
		}
	}
}

// Update's write delivered twice, its first copy late: the second is
// refused (a writer with the same token changed the record in between),
// Update reads again and writes anew, and the first copy, delivered after
// Update returned, is refused by the version it compares: each write
// counts once (0, +10, +1: 11).
func TestUpdateFirstCopyLate(t *testing.T) {
	for _, bare := range []bool{false, true} {
		t.Run(map[bool]string{false: "item returned", true: "no item returned"}[bare], func(t *testing.T) {
			other := newStore(t)
			k := fencewant.Prefix(t) + "counter"
			c := &copies{late: true, between: func() {
				if err := other.Update(t.Context(), k, 5, add(10)); err != nil {
					t.Fatal(err)
				}
			}}
			s := storeThrough(t, c, bare)
			fencewant.Put(t, s, k, 5, "0")
			calls := 0
			err := s.Update(t.Context(), k, 5, func(old fence.Record) ([]byte, error) {
				calls++
				if calls == 1 {
					c.armed.Store(true)
				}
				return add(1)(old)
			})
			if err != nil {
				t.Fatalf("Update: got %v, want nil", err)
			}
			if calls != 2 {
				t.Errorf("fn called %d times, want 2 (its first write refused, never landed)", calls)
			}
			resp, err := c.sendLate()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte("ConditionalCheckFailed")) {
				t.Fatalf("the first copy, late: got %d %s, want a failed condition", resp.StatusCode, b)
			}
			fencewant.Record(t, s, k, 5, "11")
		})
	}
}

// add is an UpdateFunc adding n to a counter.
func add(n int) fence.UpdateFunc {
	return func(old fence.Record) ([]byte, error) {
		v, err := strconv.Atoi(string(old.Value))
		if err != nil && len(old.Value) > 0 {
			return nil, errors.New("not a counter")
		}
		return []byte(strconv.Itoa(v + n)), nil
	}
}
