package sqlfence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	sqlfence "github.com/fencelock/fencelock/fence/sql"
	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
	"github.com/fencelock/fencelock/internal/testkit/testenv"
)

// mysql8Connector is MariaDB answering, as MySQL 8 does, that
// information_schema has no INNODB_LOCK_WAITS (MySQL 8 moved the lock
// waits to performance_schema.data_lock_waits).
type mysql8Connector struct {
	driver.Connector
	killDelay time.Duration // > 0: not MySQL 8; the KILL statement is this slow instead
	killSent  func()        // called as the KILL sets out
}

func (c mysql8Connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return mysql8Conn{conn, c.killDelay, c.killSent}, nil
}

type mysql8Conn struct {
	driver.Conn
	killDelay time.Duration
	killSent  func()
}

func (c mysql8Conn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}
func (c mysql8Conn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if c.killDelay == 0 && strings.Contains(q, "INNODB_LOCK_WAITS") {
		return nil, mysql8Missing
	}
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}
func (c mysql8Conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.killDelay > 0 && strings.HasPrefix(q, "KILL CONNECTION") {
		// The KILL is on its way: slow, and no longer the sender's to call back.
		c.killSent()
		time.Sleep(c.killDelay)
		ctx = context.WithoutCancel(ctx)
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}
func (c mysql8Conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if c.killDelay == 0 && strings.Contains(q, "INNODB_LOCK_WAITS") {
		return nil, mysql8Missing
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}
func (c mysql8Conn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }
func (c mysql8Conn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}
func (c mysql8Conn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
func (c mysql8Conn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

var mysql8Missing = &mysql.MySQLError{Number: 1109, SQLState: [5]byte{'4', '2', 'S', '0', '2'}, Message: "Unknown table 'INNODB_LOCK_WAITS' in information_schema"}

// TestPreemptMySQL8Error: on MySQL 8 the look's query fails with 1109
// (no INNODB_LOCK_WAITS), and the waiter's error says "the user needs
// PROCESS": the operator grants PROCESS, and the next holder still stalls
// behind the frozen one. Wanted: the error says preemption does not cover
// this server (MySQL 8: performance_schema.data_lock_waits), and does not
// blame a privilege.
func TestPreemptMySQL8Error(t *testing.T) {
	testenv.Long(t, "it waits out a preemption")
	t.Parallel()
	cfg := mysqltest.New(t).NewDatabase(t)
	plain := mysqltest.Open(t, cfg)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(mysql8Connector{Connector: conn})
	t.Cleanup(func() { _ = db.Close() })
	f, err := sqlfence.NewFences(sqlfence.MySQL, sqlfence.Identifier{sqlfence.DefaultFenceTable})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	if err := f.Advance(t.Context(), plain, "A", 1); err != nil {
		t.Fatal(err)
	}
	resume := freezeTxOn(t, plain, f, "A", 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = f.RunInTx(ctx, db, "A", 4, func(*sql.Tx) error { return nil })
	close(resume)
	if err == nil || strings.Contains(err.Error(), "needs PROCESS") || !strings.Contains(err.Error(), "MySQL 8") {
		t.Errorf("waiter on MySQL 8: got %v, want an error saying MySQL 8 is not covered (no blame on PROCESS)", err)
	}
}
