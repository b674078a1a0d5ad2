package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/postgres"
	s3fence "github.com/fencelock/fencelock/fence/s3"
	"github.com/fencelock/fencelock/internal/app/harness/check"
)

// resources is what a worker writes to: for every key a PostgreSQL row, a
// PostgreSQL transaction's register, an S3 object, an etcd key, a SQLite
// row, a Redis hash, a JetStream key-value entry and an Azure block blob.
// Fenced, each write goes through the fence/postgres, fence/s3,
// fence/etcd, fence/sql, fence/redis, fence/jetstream and fence/azblob
// adapters; in the control, through plain statements, PutObject, Put,
// HSET, kv.Put and Put Blob that check nothing.
type resources struct {
	fenced    bool
	preempt   []postgres.PreemptOption // the fenced PostgreSQL writes' (Config.WithoutPreemption)
	pool      *pgxpool.Pool
	rows      *postgres.Table
	s3        *s3.Client
	bucket    string
	store     *s3fence.Store
	closeIdle func()
	etcd      etcdResource
	sql       sqlResource
	redis     redisResource
	js        jsResource
	az        azResource
	bank      *bankStores // a bank run's (KindBank) only
	fx        *fxStores   // an effects run's (KindEffects) only
	// hold is where a nemesis pause or kill lands for S3 writes: just
	// before the PUT goes out, after the fenced store has read the object's
	// ETag and token, so that the conditional PUT is what has to refuse a
	// stale write. PostgreSQL, etcd and SQLite writes hold before their
	// single statement or transaction: never while SQLite's write lock is
	// held, which a frozen worker would keep from every other.
	hold func()
}

// holdingClient runs hold before each PutObject of a record, so that an
// armed worker pauses between its read and its conditional PUT; the Store's
// conditional-write check (its probe key) is not held.
type holdingClient struct {
	s3fence.Client
	hold func()
}

func (c holdingClient) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if aws.ToString(in.Key) != s3fence.DefaultProbeKey {
		c.hold()
	}
	return c.Client.PutObject(ctx, in, opts...)
}

// openResources opens what a worker writes to; its etcd writes go through
// cli, the worker's own client, so that its request faults and partitions
// apply to them too.
func openResources(ctx context.Context, cfg workerConfig, cli *clientv3.Client, hold func()) (*resources, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	r := &resources{fenced: cfg.Fenced, pool: pool, bucket: cfg.S3.Bucket, hold: hold}
	// A bank control's PostgreSQL writes are built without preemption, as
	// the code users wrote before it: with it, the next holder's write
	// ends the paused holder's transaction 100 ms into its wait, and the
	// lost update the control must show needs the paused holder to commit
	// within those 100 ms (57 pauses to catch one in a run of seed 881143,
	// against 21 in the fenced run).
	if cfg.NoPreempt || cfg.Kind == KindBank && !cfg.Fenced {
		r.preempt = []postgres.PreemptOption{postgres.WithoutPreemption()}
	}
	r.s3, r.closeIdle = cfg.S3.NewClient()
	if r.rows, err = postgres.NewTable(pgx.Identifier{"harness_rows"}, r.tableOptions()...); err != nil {
		r.close()
		return nil, err
	}
	if r.store, err = s3fence.New(holdingClient{r.s3, hold}, r.bucket); err != nil {
		r.close()
		return nil, err
	}
	if r.etcd, err = newEtcdResource(cli); err != nil {
		r.close()
		return nil, err
	}
	if r.sql, err = openSQLResource(cfg.SQLite); err != nil {
		r.close()
		return nil, err
	}
	if r.redis, err = openRedisResource(cfg.Redis); err != nil {
		r.close()
		return nil, err
	}
	if err := r.openLongStores(ctx, cfg); err != nil {
		r.close()
		return nil, err
	}
	if cfg.Kind == KindBank {
		if r.bank, err = newBankStores(r, cli); err != nil {
			r.close()
			return nil, err
		}
	}
	if cfg.Fx != nil {
		if r.fx, err = openFxStores(ctx, cfg, hold); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

// openLongStores opens the JetStream and Azure resources, if the run has
// their servers (the kinds long runs write: ShortResKinds).
func (r *resources) openLongStores(ctx context.Context, cfg workerConfig) error {
	var err error
	if cfg.NATS != "" {
		if r.js, err = openJSResource(ctx, cfg.NATS, cfg.Bucket); err != nil {
			return err
		}
	}
	if cfg.Azure.URL != "" {
		r.az, err = openAzResource(cfg.Azure)
	}
	return err
}

// tableOptions and txOptions are the options of the fenced PostgreSQL
// writes: none, or WithoutPreemption.
func (r *resources) tableOptions() []postgres.TableOption {
	var opts []postgres.TableOption
	for _, o := range r.preempt {
		opts = append(opts, o)
	}
	return opts
}

func (r *resources) txOptions() []postgres.TxOption {
	var opts []postgres.TxOption
	for _, o := range r.preempt {
		opts = append(opts, o)
	}
	return opts
}

func (r *resources) close() {
	r.pool.Close()
	r.closeIdle()
	if r.sql.db != nil {
		_ = r.sql.db.Close()
	}
	r.redis.close()
	r.js.close()
	if r.fx != nil {
		r.fx.close()
	}
}

// write writes val with token tok to key's resource of the given kind.
func (r *resources) write(ctx context.Context, kind check.ResKind, key string, tok fence.Token, val string) error {
	switch kind {
	case check.ResRow:
		return r.writeRow(ctx, key, tok, val)
	case check.ResTx:
		return r.writeTx(ctx, key, tok, val)
	case check.ResS3:
		return r.writeS3(ctx, key, tok, val)
	case check.ResEtcd:
		r.hold()
		return r.etcd.write(ctx, r.fenced, key, tok, val)
	case check.ResSQL:
		r.hold()
		return r.sql.write(ctx, r.fenced, key, tok, val)
	case check.ResRedis:
		r.hold()
		return r.redis.write(ctx, r.fenced, key, tok, val)
	case check.ResJetStream:
		r.hold()
		return r.js.write(ctx, r.fenced, key, tok, val)
	case check.ResAzure:
		r.hold()
		return r.az.write(ctx, r.fenced, key, tok, val)
	}
	return fmt.Errorf("harness: unknown resource kind %q", kind)
}

func (r *resources) writeRow(ctx context.Context, key string, tok fence.Token, val string) error {
	r.hold()
	if r.fenced {
		return r.rows.Upsert(ctx, r.pool, key, tok, postgres.Set("val", val))
	}
	_, err := r.pool.Exec(ctx, `INSERT INTO harness_rows (key, val, fence) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET val = EXCLUDED.val, fence = EXCLUDED.fence`, key, val, int64(tok))
	return err
}

func (r *resources) writeTx(ctx context.Context, key string, tok fence.Token, val string) error {
	r.hold()
	body := func(tx pgx.Tx) error { return txBody(ctx, tx, key, tok, val) }
	if r.fenced {
		return postgres.RunInTx(ctx, r.pool, check.ResourceName(check.ResTx, key), tok, body, r.txOptions()...)
	}
	return pgx.BeginFunc(ctx, r.pool, body)
}

// txBody is the transaction's work: set the register, and append to the
// history log in the same transaction. The register's row lock (and, when
// fenced, the fence row's before it) orders the log's ids as the commits.
func txBody(ctx context.Context, tx pgx.Tx, key string, tok fence.Token, val string) error {
	_, err := tx.Exec(ctx, `INSERT INTO harness_txreg (key, val, tok) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET val = EXCLUDED.val, tok = EXCLUDED.tok`, key, val, int64(tok))
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO harness_log (resource, tok, val) VALUES ($1, $2, $3)", check.ResourceName(check.ResTx, key), int64(tok), val)
	return err
}

func (r *resources) writeS3(ctx context.Context, key string, tok fence.Token, val string) error {
	if r.fenced {
		return r.store.Put(ctx, key, tok, []byte(val))
	}
	r.hold()
	_, err := r.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &r.bucket, Key: &key, Body: bytes.NewReader([]byte(val)),
		Metadata: map[string]string{s3fence.MetadataToken: tok.String()},
	})
	return err
}

// read returns the current value of key's resource of the given kind, ""
// when it has never been written.
func (r *resources) read(ctx context.Context, kind check.ResKind, key string) (string, error) {
	switch kind {
	case check.ResRow:
		return readValue(ctx, r.pool, "SELECT val FROM harness_rows WHERE key = $1", key)
	case check.ResTx:
		return readValue(ctx, r.pool, "SELECT val FROM harness_txreg WHERE key = $1", key)
	case check.ResS3:
		return readObject(ctx, r.s3, r.bucket, key)
	case check.ResEtcd:
		return r.etcd.read(ctx, key)
	case check.ResSQL:
		return r.sql.read(ctx, key)
	case check.ResRedis:
		return r.redis.read(ctx, key)
	case check.ResJetStream:
		return r.js.read(ctx, key)
	case check.ResAzure:
		return r.az.read(ctx, key)
	}
	return "", fmt.Errorf("harness: unknown resource kind %q", kind)
}

func readValue(ctx context.Context, pool *pgxpool.Pool, sql, key string) (string, error) {
	var v string
	err := pool.QueryRow(ctx, sql, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return v, err
}
