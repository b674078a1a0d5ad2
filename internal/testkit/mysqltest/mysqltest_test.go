package mysqltest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/internal/testkit/mysqltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(mysqltest.Main(m)) }

func TestFreshDatabases(t *testing.T) {
	a, b := mysqltest.NewDB(t), mysqltest.NewDB(t)
	if _, err := a.ExecContext(t.Context(), "CREATE TABLE x (id int)"); err != nil {
		t.Fatalf("CREATE TABLE in the first database: got %v, want nil", err)
	}
	if _, err := b.ExecContext(t.Context(), "CREATE TABLE x (id int)"); err != nil {
		t.Fatalf("CREATE TABLE in the second database: got %v, want nil (databases must be separate)", err)
	}
	var n int
	if err := a.QueryRowContext(t.Context(), "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("SELECT 1 + 1: got %d, %v, want 2, nil", n, err)
	}
}
