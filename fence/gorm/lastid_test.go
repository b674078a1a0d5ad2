package gormfence_test

import (
	"testing"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/fencelock/fencelock/internal/testkit/fencewant"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
)

// TestFencedInsertIDPerStatement: in MySQL a fenced update that lands
// sets the connection's LAST_INSERT_ID to its token; a stale update with
// the same token next on that connection (one connection in the pool,
// with clientFoundRows and without) is still refused, not taken for
// landed by the insert id the connection kept.
func TestFencedInsertIDPerStatement(t *testing.T) {
	for _, found := range []bool{false, true} {
		name := map[bool]string{false: "rows changed", true: "clientFoundRows"}[found]
		t.Run(name, func(t *testing.T) {
			cfg := mysqltest.New(t).NewDatabase(t)
			cfg.ClientFoundRows = found
			sqlDB := mysqltest.Open(t, cfg)
			sqlDB.SetMaxOpenConns(1)
			db := openGorm(t, mysql.New(mysql.Config{Conn: sqlDB}))
			mustCreate(t, db, "hi", 0)
			mustCreate(t, db, "lo", 0)
			if err := fencedUpdate(db, "hi", 9, 90); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*gorm.DB{db, db.Session(&gorm.Session{SkipDefaultTransaction: true})} {
				if err := fencedUpdate(s, "lo", 7, 70); err != nil {
					t.Fatal(err)
				}
				fencewant.Stale(t, fencedUpdate(s, "hi", 7, 71), 7, 9)
				wantAccount(t, db, "hi", 90, 9)
			}
		})
	}
}
