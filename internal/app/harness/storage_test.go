package harness

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/app/harness/check"
	"github.com/fencelock/fencelock/internal/testkit/embedetcd"
	"github.com/fencelock/fencelock/internal/testkit/reqfault"
)

// writer is what the new resource kinds' tests write through: an
// etcdResource or a sqlResource.
type writer interface {
	write(ctx context.Context, fenced bool, key string, tok fence.Token, val string) error
}

// paused is the harness's stale write on one resource: a holder of token
// 1 writes v1, then its second write (s2) is held up until a holder of
// token 2 has written; late runs that held-up write, given a function
// that writes token 2's value, and returns its outcome. Fenced, the
// storage's own history must show the stale write refused; in the control
// it lands, and the checker must find it.
type paused func(t *testing.T, fenced bool, key string, late writer, newer func() error) check.Outcome

// checkPaused runs the stale-write scenario, fenced and not, then reads the
// storage's history with read and checks it.
// writeAfterNewer is the paused write that comes after a newer holder's:
// the newer write lands first, then the paused one, token 1, is tried.
func writeAfterNewer(t *testing.T, fenced bool, key string, w writer, write2 func() error) check.Outcome {
	if err := write2(); err != nil {
		t.Fatalf("%s: newer write: %v", key, err)
	}
	return check.OutcomeOf(w.write(t.Context(), fenced, key, 1, "w0/t1/s2"))
}

func checkPaused(t *testing.T, kind check.ResKind, old, newer writer, run paused, read func(*check.Storage) error) {
	t.Helper()
	atts := map[bool][]check.Attempt{}
	for _, fenced := range []bool{true, false} {
		key := map[bool]string{true: "fenced", false: "control"}[fenced]
		at := func(val string, tok int64, call, ret int64, out check.Outcome) check.Attempt {
			return check.Attempt{Res: kind, Key: key, Token: tok, Value: val, Call: call, Return: ret, Outcome: out}
		}
		if err := old.write(t.Context(), fenced, key, 1, "w0/t1/s1"); err != nil {
			t.Fatalf("%s: first write: %v", key, err)
		}
		out := run(t, fenced, key, old, func() error { return newer.write(t.Context(), fenced, key, 2, "w1/t2/s1") })
		atts[fenced] = []check.Attempt{at("w0/t1/s1", 1, 0, 10, check.OutOK), at("w0/t1/s2", 1, 20, 500, out),
			at("w1/t2/s1", 2, 100, 110, check.OutOK)}
		if fenced && out != check.OutStale && out != check.OutUnknown {
			t.Errorf("%s: the held-up write's outcome: got %s, want stale, or unknown when its caller gave up", key, out)
		}
	}
	st := check.NewStorage()
	if err := read(st); err != nil {
		t.Fatal(err)
	}
	for fenced, want := range map[bool][]check.Record{
		true:  {{Token: 1, Value: "w0/t1/s1"}, {Token: 2, Value: "w1/t2/s1"}},
		false: {{Token: 1, Value: "w0/t1/s1"}, {Token: 2, Value: "w1/t2/s1"}, {Token: 1, Value: "w0/t1/s2"}},
	} {
		res := check.ResourceName(kind, atts[fenced][0].Key)
		if got := st.Writes[res]; !equalRecords(got, want) {
			t.Errorf("%s history: got %v, want %v", res, got, want)
		}
		one := check.NewStorage() // this resource's history alone
		one.Writes[res], one.Final[res] = st.Writes[res], st.Final[res]
		vs := check.Check(atts[fenced], one)
		if fenced && len(vs) != 0 {
			t.Errorf("%s: violations: got %v, want none", res, vs)
		}
		if !fenced && (len(vs) == 0 || vs[0].Kind != "token-order") {
			t.Errorf("%s: violations: got %v, want token-order first", res, vs)
		}
	}
}

func equalRecords(a, b []check.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func etcdTestClient(t *testing.T, srv *embedetcd.Server, opts ...grpcDial) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	for _, o := range opts {
		o(&cfg)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

type grpcDial func(*clientv3.Config)

// The etcd kind, on a real etcd: a holder's write that reaches etcd late
// (held by the request-fault injector until its caller gave up, as the
// nemesis's request faults do, and delivered after a newer token's write)
// is refused by the fenced Txn, and etcd's MVCC history, read back revision
// by revision, shows it nowhere; the control's plain Put lands, and the
// checker finds the token going down in mod-revision order. A compacted
// history fails the read instead of passing it.
func TestEtcdHistory(t *testing.T) {
	srv := embedetcd.NewServer(t)
	inj := reqfault.New(1)
	t.Cleanup(inj.Close)
	faulty := etcdTestClient(t, srv, func(c *clientv3.Config) { c.DialOptions = inj.DialOptions() })
	direct := etcdTestClient(t, srv)
	old, err := newEtcdResource(faulty)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := newEtcdResource(direct)
	if err != nil {
		t.Fatal(err)
	}
	late := func(t *testing.T, fenced bool, key string, w writer, write2 func() error) check.Outcome {
		held := inj.Hold(reqfault.Any)
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() { got <- w.write(ctx, fenced, key, 1, "w0/t1/s2") }()
		<-held.Caught()
		cancel()
		out := check.OutcomeOf(<-got)
		if err := write2(); err != nil {
			t.Fatalf("%s: newer write: %v", key, err)
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("%s: late delivery: %v", key, err)
		}
		return out
	}
	read := func(st *check.Storage) error { return readEtcd(t.Context(), st, direct, []string{"fenced", "control"}) }
	checkPaused(t, check.ResEtcd, old, newer, late, read)

	resp, err := direct.Get(t.Context(), "any")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if err := read(check.NewStorage()); err == nil {
		t.Error("reading a compacted history: got nil, want an error")
	}
}

// The sql kind, on a real SQLite file shared by two handles (two workers):
// a paused holder's upsert after a newer token's is refused by fence/sql
// and fires no trigger, so the log (the database's own history) does not
// have it; the control's plain upsert lands, and its trigger logs it after
// the newer write.
func TestSQLiteHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "harness.db")
	if err := createSQLiteSchema(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	open := func() sqlResource {
		r, err := openSQLResource(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.db.Close() })
		return r
	}
	old, newer := open(), open()
	checkPaused(t, check.ResSQL, old, newer, writeAfterNewer,
		func(st *check.Storage) error { return readSQL(t.Context(), st, path) })
}

// The control's plain upsert is tried again while another process holds
// SQLite's write lock (SQLITE_BUSY), as fence/sql's fenced one is, and
// lands once the lock is free; run once (the control of this test), the
// same statement fails busy, a write of unknown outcome to the checker.
func TestSQLiteControlRetriesBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "harness.db")
	if err := createSQLiteSchema(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	holder, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock, err := holder.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// No busy_timeout: a writer that finds the lock taken is told at once.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var first sync.Once
	busy := make(chan struct{})
	r := sqlResource{db: db, busy: func() { first.Do(func() { close(busy) }) }}
	if err := r.plainUpsert(t.Context(), "k", 1, "v1"); !sqliteBusy(err) {
		t.Fatalf("plain upsert with the lock taken: got %v, want SQLITE_BUSY", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.write(t.Context(), false, "k", 1, "v1") }()
	select {
	case <-busy:
	case err := <-done:
		t.Fatalf("control's upsert with the lock taken: returned %v, want it tried again until the lock is free", err)
	}
	if _, err := lock.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("control's upsert: got %v, want nil once the lock is free", err)
	}
	if sqliteBusy(errors.New("other")) || sqliteBusy(nil) {
		t.Error("sqliteBusy: true for an error that is no SQLite busy")
	}
}
