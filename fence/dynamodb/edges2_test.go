package dynamofence_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	dynamofence "github.com/fencelock/fencelock/fence/dynamodb"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

func TestReviewLateAndLostEveryOp(t *testing.T) {
	var f faults
	c := faultyClient(t, &f)
	s := mustNew(t, c)
	other := newStore(t)
	tb := accounts(t, c)
	otb := accounts(t, client(t))
	late := func(arm func(), send func() error, newer func()) error {
		held, release := f.HoldNextRequest()
		_ = arm
		errc := make(chan error, 1)
		go func() { errc <- send() }()
		<-held
		newer()
		close(release)
		return <-errc
	}
	t.Run("Delete late", func(t *testing.T) {
		k := fencewant.Prefix(t) + "k"
		fencewant.Put(t, s, k, 5, "a")
		fencewant.Stale(t, late(nil, func() error { return s.Delete(t.Context(), k, 7) }, func() { fencewant.Put(t, other, k, 9, "b") }), 7, shown(t, 9))
		fencewant.Record(t, other, k, 9, "b")
	})
	t.Run("Update write late", func(t *testing.T) {
		k := fencewant.Prefix(t) + "k"
		fencewant.Put(t, s, k, 5, "a")
		errc := make(chan error, 1)
		var held, release chan struct{}
		ready := make(chan struct{})
		go func() {
			errc <- s.Update(t.Context(), k, 7, func(old fence.Record) ([]byte, error) {
				if held == nil {
					held, release = f.HoldNextRequest()
					close(ready)
				}
				return []byte("u"), nil
			})
		}()
		<-ready
		<-held
		fencewant.Put(t, other, k, 9, "b")
		close(release)
		fencewant.Stale(t, <-errc, 7, 9)
		fencewant.Record(t, other, k, 9, "b")
	})
	t.Run("Table.Update late", func(t *testing.T) {
		k := account(t, 11)
		if err := otb.Update(t.Context(), k, 5, setBalance(1)); err != nil {
			t.Fatal(err)
		}
		err := late(nil, func() error { return tb.Update(t.Context(), k, 7, setBalance(2)) }, func() {
			if err := otb.Update(t.Context(), k, 9, setBalance(3)); err != nil {
				t.Fatal(err)
			}
		})
		fencewant.Stale(t, err, 7, shown(t, 9))
	})
	t.Run("Table.GetForUpdate late", func(t *testing.T) {
		k := account(t, 12)
		err := late(nil, func() error { _, err := tb.GetForUpdate(t.Context(), k, 7); return err }, func() {
			if err := otb.Update(t.Context(), k, 9, setBalance(3)); err != nil {
				t.Fatal(err)
			}
		})
		fencewant.Stale(t, err, 7, shown(t, 9))
	})
	t.Run("Transact late", func(t *testing.T) {
		needTransactions(t)
		a, b := account(t, 13), account(t, 14)
		err := late(nil, func() error {
			return dynamofence.Transact(t.Context(),
				dynamofence.TxWrite{Table: tb, Key: a, Token: 7, Update: setBalance(1)},
				dynamofence.TxWrite{Table: tb, Key: b, Token: 7, Update: setBalance(1)})
		}, func() {
			if err := otb.Update(t.Context(), b, 9, setBalance(3)); err != nil {
				t.Fatal(err)
			}
		})
		fencewant.Stale(t, err, 7, 9)
	})
	lost := func(t *testing.T, do func() error) {
		t.Helper()
		f.LoseNextReply(func() {})
		fencewant.Unknown(t, do(), 7)
	}
	t.Run("lost replies", func(t *testing.T) {
		k := fencewant.Prefix(t) + "k"
		fencewant.Put(t, s, k, 5, "0")
		lost(t, func() error { return s.Delete(t.Context(), k, 7) })
		lost(t, func() error { _, err := s.GetForUpdate(t.Context(), k, 7); return err })
		lost(t, func() error {
			return s.Update(t.Context(), k, 7, func(fence.Record) ([]byte, error) { f.LoseNextReply(func() {}); return []byte("x"), nil })
		})
		a := account(t, 15)
		lost(t, func() error { return tb.Update(t.Context(), a, 7, setBalance(1)) })
		lost(t, func() error { _, err := tb.GetForUpdate(t.Context(), a, 7); return err })
		lost(t, func() error {
			return dynamofence.Transact(t.Context(), dynamofence.TxWrite{Table: tb, Key: a, Token: 7, Update: setBalance(1)})
		})
	})
}

// An empty value: DynamoDB stores it (empty binary values are allowed
// since 2020) and Get returns it empty; minidyn 0.8.2 refuses it. Either
// way the answer is definite, never an unknown outcome: a refusal wrote
// nothing.
func TestEmptyValue(t *testing.T) {
	s := newStore(t)
	k := fencewant.Prefix(t) + "e"
	err := s.Put(t.Context(), k, 1, nil)
	if err != nil {
		if errors.Is(err, fence.ErrUnknownOutcome) || !strings.Contains(err.Error(), "refused by DynamoDB") {
			t.Fatalf("empty Put: got %v, want nil or DynamoDB's refusal", err)
		}
		if _, gerr := s.Get(t.Context(), k); !errors.Is(gerr, fence.ErrNotFound) {
			t.Fatalf("after a refused empty Put: Get got %v, want ErrNotFound", gerr)
		}
		t.Logf("this server refuses an empty binary value (minidyn does; DynamoDB does not): %v", err)
		return
	}
	if r, gerr := s.Get(t.Context(), k); gerr != nil || len(r.Value) != 0 || r.Token != 1 {
		t.Fatalf("after an empty Put: Get got %v %q, want token 1 and an empty value", gerr, r.Value)
	}
}

func TestReviewShapes(t *testing.T) {
	c := client(t)
	s := mustNew(t, c)
	for name, v := range map[string][]byte{"binary": {0, 0xff, 0, 0x80}, "300KB": make([]byte, 300<<10)} {
		k := fencewant.Prefix(t) + name
		if err := s.Put(t.Context(), k, 1, v); err != nil {
			t.Errorf("%s: Put: %v", name, err)
			continue
		}
		r, err := s.Get(t.Context(), k)
		if err != nil || string(r.Value) != string(v) {
			t.Errorf("%s: Get: %v, %d bytes", name, err, len(r.Value))
		}
	}
	for _, k := range []string{"a b", "ü/..", "\x00", "a#b?c%2F"} {
		k = fencewant.Prefix(t) + k
		fencewant.Put(t, s, k, 3, "v")
		fencewant.Stale(t, s.Put(t.Context(), k, 2, []byte("x")), 2, shown(t, 3))
	}
}

// minidyn compares numbers as float64: two tokens above 2^53 one apart
// are equal to it, and the older one lands. CheckConditions (tokens 2 and
// 1) passes this server.
func TestReviewBigTokensProbePasses(t *testing.T) {
	c := client(t)
	s := mustNew(t, c)
	if err := s.CheckConditions(t.Context()); err != nil {
		t.Fatal(err)
	}
	k := fencewant.Prefix(t) + "max"
	const top = fence.Token(1<<63 - 1)
	fencewant.Put(t, s, k, top, "top")
	t.Run("int64 max", func(t *testing.T) {
		fencewant.Stale(t, s.Put(t.Context(), k, top-1, []byte("below")), top-1, shown(t, top))
	})
	k2 := fencewant.Prefix(t) + "2^62"
	fencewant.Put(t, s, k2, 1<<53+1, "a")
	t.Run("2^53+1 then 2^53", func(t *testing.T) {
		fencewant.Stale(t, s.Put(t.Context(), k2, 1<<53, []byte("b")), 1<<53, shown(t, 1<<53+1))
	})
	tb := accounts(t, c)
	a := account(t, 20)
	if err := tb.Update(t.Context(), a, top, setBalance(1)); err != nil {
		t.Fatal(err)
	}
	t.Run("Table int64 max", func(t *testing.T) {
		fencewant.Stale(t, tb.Update(t.Context(), a, top-1, setBalance(2)), top-1, shown(t, top))
	})
}

func TestReviewTransactShapes(t *testing.T) {
	c := client(t)
	tb := accounts(t, c)
	a := account(t, 30)
	err := dynamofence.Transact(t.Context(),
		dynamofence.TxWrite{Table: tb, Key: a, Token: 5, Update: expression.Add(expression.Name("balance"), expression.Value(1))},
		dynamofence.TxWrite{Table: tb, Key: a, Token: 5, Update: expression.Add(expression.Name("balance"), expression.Value(1))})
	b, _ := balance(t, c, a)
	t.Logf("same item twice: %v, balance %d", err, b)
	if err == nil {
		t.Errorf("same item twice in one Transact: accepted (balance %d); DynamoDB refuses it (ValidationException)", b)
	}
	var ws []dynamofence.TxWrite
	for i := range 101 {
		ws = append(ws, dynamofence.TxWrite{Table: tb, Key: account(t, 100+i), Token: 5, Update: setBalance(i)})
	}
	if err := dynamofence.Transact(t.Context(), ws...); !errors.Is(err, dynamofence.ErrInvalidArgument) {
		t.Errorf("101 writes: %v", err)
	}
	err = dynamofence.Transact(t.Context(), ws[:100]...)
	t.Logf("100 writes: %v", err)
	_ = strconv.Itoa
	_ = types.AttributeValueMemberN{}
}
