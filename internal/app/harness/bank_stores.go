package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	etcdfence "github.com/fencelock/fencelock/fence/etcd"
	"github.com/fencelock/fencelock/fence/postgres"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// bankEtcdTimeout bounds one leg of a transfer on etcd: etcdTimeout, as
// for the register's writes, after a nemesis pause (the lease, and up to
// 1.2 s more) that lands inside the leg, between its read and its write.
const bankEtcdTimeout = etcdTimeout + 3*time.Second

// bankKV is what a transfer needs of a KV store: fence/etcd's and
// fence/s3's Store are both.
type bankKV interface {
	fence.Store
	fence.Updater
}

// newBankKV returns the bank's KV stores: a fence/etcd Store on kv (under
// the register's prefix, with keys of their own: bankKey) and a fence/s3
// Store on c. The S3 store is not the register's, whose client holds
// before each PUT: a transfer holds where it chooses, between a leg's
// read and its write.
func newBankKV(kv clientv3.KV, c s3fence.Client, bucket string) (map[check.ResKind]bankKV, error) {
	es, err := etcdfence.New(kv, etcdPrefix)
	if err != nil {
		return nil, err
	}
	ss, err := s3fence.New(c, bucket)
	if err != nil {
		return nil, err
	}
	return map[check.ResKind]bankKV{check.ResBankEtcd: es, check.ResBankS3: ss}, nil
}

// bankKey is an account's key in the KV stores.
func bankKey(account string) string { return "bank/" + account }

// account is an account's record in a KV store: its balance and the
// operations applied to it, so that the record is its own log.
type account struct {
	Balance int64          `json:"balance"`
	Ops     []check.BankOp `json:"ops"`
}

// applyOp returns the record b with op applied.
func applyOp(b []byte, op check.BankOp) ([]byte, error) {
	var a account
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("harness: account record %q: %w", b, err)
	}
	a.Balance += op.Amount
	a.Ops = append(a.Ops, op)
	return json.Marshal(a)
}

// bankStores are the stores a bank worker moves money in: PostgreSQL's
// harness_bank rows and the KV stores.
type bankStores struct {
	fenced bool
	pool   *pgxpool.Pool
	table  *postgres.Table // bankTable
	kv     map[check.ResKind]bankKV
	hold   func() // the nemesis's hold: between a transfer's read and its write
}

func newBankStores(r *resources, cli *clientv3.Client) (*bankStores, error) {
	t, err := postgres.NewTable(pgx.Identifier{bankTable}, r.tableOptions()...)
	if err != nil {
		return nil, err
	}
	kv, err := newBankKV(cli, r.s3, r.bucket)
	if err != nil {
		return nil, err
	}
	return &bankStores{fenced: r.fenced, pool: r.pool, table: t, kv: kv, hold: r.hold}, nil
}

// transfer makes t on the store of kind with the accounts' guards, and
// returns t with Acked and Tried set as the outcome says (see
// check.Transfer), and the error.
func (b *bankStores) transfer(ctx context.Context, kind check.ResKind, t check.Transfer, from, to *fence.Guard) (check.Transfer, error) {
	if kind == check.ResBankPG {
		err := b.transferPG(ctx, t, from, to)
		switch {
		case err == nil:
			t.Acked, t.Tried = 2, 2
		case refused(err): // rolled back
			t.Acked, t.Tried = 0, 0
		default:
			t.Acked, t.Tried = 0, 2
		}
		return t, err
	}
	for i, g := range []*fence.Guard{from, to} {
		if err := b.leg(ctx, kind, g, &t, i); err != nil {
			t.Acked, t.Tried = i, i+1
			if refused(err) {
				t.Tried = i
			}
			return t, err
		}
	}
	t.Acked, t.Tried = 2, 2
	return t, nil
}

// refused reports whether err says a write was refused, by the resource
// (stale) or by the guard before any I/O (lock lost): it did not land.
func refused(err error) bool {
	out := check.OutcomeOf(err)
	return out == check.OutStale || out == check.OutLost
}

// leg applies leg i of t to its account in the KV store of kind, with
// its account's guard: fenced, with Update, which claims the account as
// it reads it; in the control, with a plain Get and then a Put with the
// token, the code a user writes without Update. The nemesis's hold is
// between the read and the write.
func (b *bankStores) leg(ctx context.Context, kind check.ResKind, g *fence.Guard, t *check.Transfer, i int) error {
	timeout := writeTimeout
	if kind == check.ResBankEtcd {
		timeout = bankEtcdTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	acct, amt := t.Leg(i)
	st, key, op := b.kv[kind], bankKey(acct), check.BankOp{ID: t.ID, Amount: amt}
	if b.fenced {
		return g.Update(ctx, st, key, func(old fence.Record) ([]byte, error) {
			b.hold()
			return applyOp(old.Value, op)
		})
	}
	return g.Do(ctx, func(ctx context.Context, tok fence.Token) error {
		old, err := st.Get(ctx, key)
		if err != nil {
			return err
		}
		b.hold()
		v, err := applyOp(old.Value, op)
		if err != nil {
			return err
		}
		return st.Put(ctx, key, tok, v)
	})
}
