package gormfence

import (
	"fmt"
	"time"

	"gorm.io/gorm"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
)

// pluginName is the name the plugin is registered under (gorm.Config's
// Plugins map).
const pluginName = "fencelock:gormfence"

// Plugin adds fencing to a *gorm.DB: register it once, after gorm.Open,
// with db.Use(gormfence.Plugin{}). Its callbacks act only on statements
// marked by [Fenced] (and so [Claim] and [Update]); every other statement
// runs as before. The zero Plugin is ready to use.
//
// It works with the MySQL (and MariaDB), PostgreSQL and SQLite
// dialectors (gorm.io/driver/mysql, gorm.io/driver/postgres, and
// github.com/glebarez/sqlite or gorm.io/driver/sqlite); Initialize fails
// on another.
//
// A claim ([Claim], and [Update]'s) that waits on another transaction
// holding its row, on MariaDB (and MySQL 5.7) or PostgreSQL, looks at that
// transaction after PreemptAfter and ends it when it claimed the row with
// an older token: a holder frozen inside Update past its lease does not
// stall the next one ("A holder frozen inside Update" in docs/gorm.md).
type Plugin struct {
	// PreemptAfter is how long a claim waits on another transaction
	// holding its row before it looks at what holds it, and ends a
	// transaction that claimed the row with an older token (its connection
	// is ended: KILL CONNECTION on MySQL and MariaDB, pg_terminate_backend
	// on PostgreSQL). It looks again every 250 ms until the claim returns.
	// Zero means the default, 100 ms; a negative value makes Initialize
	// fail. SQLite has no other session to end: a claim there waits out
	// busy_timeout.
	PreemptAfter time.Duration
	// NoPreemption makes claims wait for whatever holds their row for as
	// long as their context allows (and the server's lock wait timeout),
	// ending nothing: a holder frozen inside Update then stalls the next
	// one for as long as it stays frozen. Default false: preemption on.
	// Initialize fails when PreemptAfter is set too.
	NoPreemption bool

	sharedPool bool // an update outside a transaction runs on the pool, not a connection of its own (the control of TestFencedAnswerLostPostgreSQL)
}

var _ gorm.Plugin = Plugin{}

// Name returns the plugin's name.
func (Plugin) Name() string { return pluginName }

// Initialize registers the plugin's callbacks on db. gorm calls it from
// db.Use. It fails on a dialector other than MySQL, PostgreSQL or SQLite,
// and on a negative PreemptAfter, or one set with NoPreemption, with an
// error matching [ErrInvalidArgument].
func (p Plugin) Initialize(db *gorm.DB) error {
	switch {
	case p.PreemptAfter < 0:
		return fmt.Errorf("%w: Plugin.PreemptAfter %v: want > 0, or 0 for the default (NoPreemption turns preemption off)", ErrInvalidArgument, p.PreemptAfter)
	case p.PreemptAfter > 0 && p.NoPreemption:
		return fmt.Errorf("%w: Plugin.PreemptAfter %v with NoPreemption: set one of them", ErrInvalidArgument, p.PreemptAfter)
	}
	d, err := dialectOf(db)
	if err != nil {
		return err
	}
	c := &callbacks{d: d, sharedPool: p.sharedPool}
	u := db.Callback().Update()
	if err := u.Before("gorm:begin_transaction").Register("gormfence:check_update", c.checkUpdate); err != nil {
		return err
	}
	if err := u.Before("gorm:update").Register("gormfence:before_update", c.beforeUpdate); err != nil {
		return err
	}
	if err := u.After("gorm:update").Before("gorm:save_after_associations").Register("gormfence:after_update", c.afterUpdate); err != nil {
		return err
	}
	if err := u.After("gorm:commit_or_rollback_transaction").Register("gormfence:after_commit", c.afterCommit); err != nil {
		return err
	}
	for _, r := range []struct {
		name string
		reg  func(func(*gorm.DB)) error
	}{
		{"create", func(f func(*gorm.DB)) error {
			return db.Callback().Create().Before("*").Register("gormfence:refuse_create", f)
		}},
		{"delete", func(f func(*gorm.DB)) error {
			return db.Callback().Delete().Before("*").Register("gormfence:refuse_delete", f)
		}},
		{"query", func(f func(*gorm.DB)) error {
			return db.Callback().Query().Before("*").Register("gormfence:refuse_query", f)
		}},
		{"raw", func(f func(*gorm.DB)) error {
			return db.Callback().Raw().Before("*").Register("gormfence:refuse_raw", f)
		}},
		{"row", func(f func(*gorm.DB)) error {
			return db.Callback().Row().Before("*").Register("gormfence:refuse_row", f)
		}},
	} {
		if err := r.reg(refuse(r.name)); err != nil {
			return err
		}
	}
	return nil
}

// dialectOf maps the dialector's name to fence/sql's dialect, whose
// rules (error classes, unknown outcomes) this package reuses.
func dialectOf(db *gorm.DB) (sqlfence.Dialect, error) {
	if db == nil || db.Dialector == nil {
		return 0, fmt.Errorf("%w: a *gorm.DB with no dialector; open it with gorm.Open", ErrInvalidArgument)
	}
	switch n := db.Dialector.Name(); n {
	case "mysql":
		return sqlfence.MySQL, nil
	case "postgres":
		return sqlfence.PostgreSQL, nil
	case "sqlite":
		return sqlfence.SQLite, nil
	default:
		return 0, fmt.Errorf("%w: dialector %q (gormfence works with mysql, postgres and sqlite)", ErrInvalidArgument, n)
	}
}

// refuse is a callback that fails a statement marked by [Fenced] that is
// not an update: a fenced create, delete or query would run unfenced.
func refuse(what string) func(*gorm.DB) {
	return func(db *gorm.DB) {
		if _, ok := markOf(db.Statement); ok {
			_ = db.AddError(fmt.Errorf("%w: Fenced marks updates (Update, Updates, UpdateColumn(s), Save of an existing row), not a %s; nothing was sent", ErrInvalidArgument, what))
		}
	}
}
