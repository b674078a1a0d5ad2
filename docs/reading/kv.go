package main

import (
	"context"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/etcdlock"
	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
)

// transferKV moves 100 from acct-A to acct-B, two etcd keys written in one
// request that compares both keys' floors and records.
func transferKV(ctx context.Context, locks *etcdlock.Client, store *etcdfence.Store) error {
	m, err := locks.LockAll(ctx, []string{"acct-A", "acct-B"}, etcdlock.WithWait(10*time.Second))
	if err != nil {
		return err
	}
	defer unlock(ctx, m)

	return store.UpdateHeld(ctx, m, func(old map[string]fence.Record) (map[string][]byte, error) {
		// old has both accounts, each claimed with its own token before this
		// runs; the zero Record for one with no value.
		a, err := balance(old["acct-A"])
		if err != nil {
			return nil, err // nothing written; UpdateHeld returns it
		}
		b, err := balance(old["acct-B"])
		if err != nil {
			return nil, err
		}
		if a < 100 {
			return nil, errInsufficientFunds // nothing written
		}
		return map[string][]byte{
			"acct-A": []byte(strconv.Itoa(a - 100)),
			"acct-B": []byte(strconv.Itoa(b + 100)),
		}, nil // a key left out keeps its record
	})
}

// balance is an account's balance in its record; an account never written
// opens with 1000, as schema.sql's rows do.
func balance(r fence.Record) (int, error) {
	if r.Value == nil {
		return 1000, nil
	}
	return strconv.Atoi(string(r.Value))
}

// countInvoice adds one to the counter invoices-sent under the lock
// invoices and returns the count it wrote.
func countInvoice(ctx context.Context, locks *etcdlock.Client, store fence.Updater) (int, error) {
	lock, err := locks.Lock(ctx, "invoices", etcdlock.WithWait(10*time.Second))
	if err != nil {
		return 0, err
	}
	defer unlock(ctx, lock)
	guard, err := fence.NewGuard(lock)
	if err != nil {
		return 0, err
	}

	var n int // the function may run more than once: it only computes
	err = guard.Update(ctx, store, "invoices-sent", func(old fence.Record) ([]byte, error) {
		n = 0
		if old.Value != nil {
			n, _ = strconv.Atoi(string(old.Value))
		}
		n++
		return strconv.AppendInt(nil, int64(n), 10), nil
	})
	return n, err
}
