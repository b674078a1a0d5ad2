package gormfence_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/fencelock/fencelock/fence"
	gormfence "github.com/fencelock/fencelock/fence/gorm"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/netproxy"
	"github.com/fencelock/fencelock/internal/testkit/pgtest"
	"github.com/fencelock/fencelock/internal/testkit/poll"
)

// proxiedPostgres returns two *gorm.DB on one fresh PostgreSQL database:
// direct, and through a proxy that can break the connection.
func proxiedPostgres(t *testing.T, plugin ...gorm.Plugin) (direct, viaProxy *gorm.DB, p *netproxy.Proxy) {
	t.Helper()
	dsn := pgtest.New(t).NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, cfg.Host, cfg.Port = netproxy.For(t, cfg.Host, cfg.Port)
	cfg.Fallbacks = nil
	// The UPDATE is one round trip, not a prepare (whose answer the proxy
	// would hold) and then an execute.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	direct = openGorm(t, postgres.Open(dsn))
	viaProxy = openGorm(t, postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)}), plugin...)
	return direct, viaProxy, p
}

// TestFencedAnswerLostPostgreSQL: on PostgreSQL through pgx's
// database/sql driver, a Fenced update outside any transaction
// (SkipDefaultTransaction) that the server applies while its answer is
// lost is an unknown outcome, and the write landed once: it ran on a
// connection of its own, which sends it once. The control runs it on the
// *sql.DB (PluginSharingPoolForTest): pgx reports the lost answer as
// "conn closed", safe to retry, so its driver returns driver.ErrBadConn
// and database/sql sends the UPDATE again on a new connection; the token
// is the same, the fence lets it through, and the caller gets nil for an
// update applied twice (balance + 70 adds 140). Inside GORM's default
// transaction the same loss is a known failure, nothing written: the
// COMMIT is never sent.
func TestFencedAnswerLostPostgreSQL(t *testing.T) {
	tests := []struct {
		name       string
		autocommit bool
		plugin     gorm.Plugin
	}{
		{"autocommit", true, gormfence.Plugin{}},
		{"autocommit on the pool (control)", true, gormfence.PluginSharingPoolForTest},
		{"in the default transaction", false, gormfence.Plugin{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct, viaProxy, p := proxiedPostgres(t, tt.plugin)
			mustCreate(t, direct, "k", 0)
			_ = viaProxy.Callback().Update().Before("gorm:update").Register("test:mute", func(*gorm.DB) { p.CutReplies() })
			applied := make(chan struct{})
			go func() {
				defer close(applied)
				poll.Until(t, "the update to be applied", func() bool {
					if tt.autocommit {
						var a Account
						return direct.Session(&gorm.Session{NewDB: true}).Take(&a, "id = ?", "k").Error == nil && a.Fence == 7
					}
					var n int64
					err := direct.Raw("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE 'UPDATE%'").Scan(&n).Error
					return err == nil && n == 1
				})
				p.Reset()
				p.Heal()
			}()
			db := viaProxy.Session(&gorm.Session{SkipDefaultTransaction: tt.autocommit})
			err := db.Scopes(gormfence.Fenced(7)).Model(&Account{ID: "k"}).Update("balance", gorm.Expr("balance + 70")).Error
			<-applied
			switch {
			case tt.plugin == gormfence.PluginSharingPoolForTest:
				var a Account
				if e := direct.Take(&a, "id = ?", "k").Error; e != nil {
					t.Fatal(e)
				}
				if err == nil && a.Balance == 140 {
					return // the double apply, reported as nil
				}
				t.Fatalf("control: got error %v and balance %d, want nil and 140 (sent again by database/sql)", err, a.Balance)
			case tt.autocommit:
				wantAccount(t, direct, "k", 70, 7) // applied once
				fencewant.Unknown(t, err, 7)
			default:
				if err == nil || errors.Is(err, fence.ErrUnknownOutcome) {
					t.Fatalf("got error %v, want a failure not matching fence.ErrUnknownOutcome", err)
				}
				wantAccount(t, direct, "k", 0, 0)
			}
		})
	}
}
