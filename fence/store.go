package fence

import "context"

// Record is what a [Store] holds for one resource key: the value of the last
// accepted write and the token it carried.
//
// Token is the token of the write that stored Value, or a higher one: an
// adapter that records a claim ([Updater.GetForUpdate], [Updater.Update]'s
// read) with the value it claims (MemoryStore, fence/s3, fence/postgres,
// fence/sql) reports the claim's token from then on, and one that keeps the
// floor apart (fence/etcd) the writer's. Either way no write with a token
// below the claim's lands on the key afterwards.
type Record struct {
	Value []byte
	Token Token
}

// Store is a resource that enforces fencing itself. Every adapter in this
// module implements it and passes the conformance suite in fence/fencetest
// against the real server: the in-memory [MemoryStore], fence/postgres,
// fence/sql (MySQL and MariaDB, SQLite, PostgreSQL), fence/s3, fence/gcs,
// fence/azblob, fence/dynamodb, fence/etcd, fence/redis and
// fence/jetstream (NATS JetStream KV); fence/gorm passes it through GORM.
//
// The contract (the adapters' other fenced writes, such as fence/postgres's
// Table.Update, obey its rules for Put too):
//
//   - Put refuses, atomically and by itself, a write whose token is lower
//     than the highest token the resource has accepted for that key,
//     returning an error that matches [ErrStale]; a refused write changes
//     nothing.
//   - A write with a token equal to the highest accepted is accepted (the same
//     holder writing again); a higher token is accepted and becomes the new floor.
//   - The first write to a key that has never been written is accepted.
//   - Put rejects an empty key ([ErrInvalidKey]) and a token that is not
//     positive ([ErrInvalidToken]) before any I/O.
//   - When Put cannot tell whether the write was applied (network error,
//     context ended mid-request) it returns an error matching
//     [ErrUnknownOutcome]; the resource then holds either the old record or
//     the new one, whole, never a mix.
//   - Get returns the current record, or an error matching [ErrNotFound].
//
// Get claims nothing: a critical section that reads before it writes
// reads with [Updater]'s GetForUpdate or Update, which every adapter's
// Store implements too, and which fence/fencetest requires (a Store of
// your own that lacks them fails its read cases).
//
// Implementations are safe for concurrent use.
type Store interface {
	Put(ctx context.Context, key string, token Token, value []byte) error
	Get(ctx context.Context, key string) (Record, error)
}
