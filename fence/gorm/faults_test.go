package gormfence_test

import (
	"errors"
	"testing"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/poll"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// proxied returns two *gorm.DB on one fresh MariaDB database: direct, and
// through a proxy that can break the connection.
func proxied(t *testing.T) (direct, viaProxy *gorm.DB, p *netproxy.Proxy) {
	t.Helper()
	srv := mysqltest.New(t)
	cfg := srv.NewDatabase(t)
	p, err := netproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	direct = openGorm(t, mysql.New(mysql.Config{Conn: mysqltest.Open(t, cfg)}))
	pcfg := cfg.Clone()
	pcfg.Addr = p.Addr()
	viaProxy = openGorm(t, mysql.New(mysql.Config{Conn: mysqltest.Open(t, pcfg)}))
	return direct, viaProxy, p
}

// TestCommitLost: a fenced write's COMMIT reaches the server, which
// commits, and the answer is lost: the outcome is unknown, and the write
// did land. Both commits are tried: the one gorm's default transaction
// sends after a Fenced update, and Update's own. The control breaks the
// connection before the write: it fails, COMMIT is never sent, nothing is
// written, and the failure is a known one.
func TestCommitLost(t *testing.T) {
	testenv.Long(t, "it waits out COMMITs held by a proxy")
	forms := []struct {
		name  string
		write func(db *gorm.DB, beforeWrite, beforeCommit func()) error
	}{
		{"Fenced", func(db *gorm.DB, beforeWrite, beforeCommit func()) error {
			cb := db.Callback().Update()
			_ = cb.Before("gorm:update").Register("test:before_write", func(*gorm.DB) { beforeWrite() })
			_ = cb.Before("gorm:commit_or_rollback_transaction").Register("test:before_commit", func(*gorm.DB) { beforeCommit() })
			return fencedUpdate(db, "k", 7, 70)
		}},
		{"Update", func(db *gorm.DB, beforeWrite, beforeCommit func()) error {
			armed := false // set by fn: the next update is the fenced write
			_ = db.Callback().Update().Before("gorm:commit_or_rollback_transaction").Register("test:before_commit", func(*gorm.DB) {
				if armed {
					beforeCommit() // after the write, before Update's COMMIT
				}
			})
			a := Account{ID: "k"}
			return gormfence.Update(t.Context(), db, 7, &a, func(*gorm.DB) error {
				beforeWrite()
				a.Balance = 70
				armed = true
				return nil
			})
		}},
	}
	for _, f := range forms {
		for _, atCommit := range []bool{true, false} {
			name := f.name + map[bool]string{true: "/answer to COMMIT lost", false: "/before the write (control)"}[atCommit]
			t.Run(name, func(t *testing.T) {
				direct, viaProxy, p := proxied(t)
				mustCreate(t, direct, "k", 0)
				committed := make(chan struct{})
				go func() {
					defer close(committed)
					if !atCommit {
						return
					}
					poll.Until(t, "the write to be committed", func() bool {
						var a Account
						return direct.Session(&gorm.Session{NewDB: true}).Take(&a, "id = ?", "k").Error == nil && a.Fence == 7
					})
					p.Reset()
				}()
				beforeWrite := func() {
					if !atCommit {
						p.Reset()
					}
				}
				beforeCommit := func() {
					if atCommit {
						// COMMIT and its answer are each held this long: the
						// row is seen committed, and the connection reset,
						// while the answer is held.
						p.Delay(2 * time.Second)
					}
				}
				err := f.write(viaProxy, beforeWrite, beforeCommit)
				<-committed
				if atCommit {
					fencewant.Unknown(t, err, 7)
					wantAccount(t, direct, "k", 70, 7)
					return
				}
				if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
					t.Fatalf("got error %v, want a failure not matching fence.ErrUnknownOutcome", err)
				}
				wantAccount(t, direct, "k", 0, 0)
			})
		}
	}
}

// TestFencedAnswerLost: a Fenced update outside any transaction (GORM's
// SkipDefaultTransaction) reaches the server, which applies it, and its
// answer is lost: the outcome is unknown, and the write did land. (The
// driver's error alone, an invalid connection, would read as a failure.)
func TestFencedAnswerLost(t *testing.T) {
	testenv.Long(t, "it waits out an UPDATE held by a proxy")
	srv := mysqltest.New(t)
	cfg := srv.NewDatabase(t)
	p, err := netproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	direct := openGorm(t, mysql.New(mysql.Config{Conn: mysqltest.Open(t, cfg)}))
	pcfg := cfg.Clone()
	pcfg.Addr = p.Addr()
	pcfg.InterpolateParams = true // the UPDATE is one round trip, not prepare and execute
	viaProxy := openGorm(t, mysql.New(mysql.Config{Conn: mysqltest.Open(t, pcfg)}))
	mustCreate(t, direct, "k", 0)
	// The UPDATE and its answer are each held this long: the row is seen
	// written, and the connection reset, while the answer is held.
	_ = viaProxy.Callback().Update().Before("gorm:update").Register("test:hold", func(*gorm.DB) { p.Delay(2 * time.Second) })
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		poll.Until(t, "the update to be applied", func() bool {
			var a Account
			return direct.Session(&gorm.Session{NewDB: true}).Take(&a, "id = ?", "k").Error == nil && a.Fence == 7
		})
		p.Reset()
	}()
	err = fencedUpdate(viaProxy.Session(&gorm.Session{SkipDefaultTransaction: true}), "k", 7, 70)
	<-applied
	fencewant.Unknown(t, err, 7)
	wantAccount(t, direct, "k", 70, 7)
}
