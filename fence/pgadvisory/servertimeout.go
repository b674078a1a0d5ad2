package pgadvisory

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// serverTimeout makes o, without WithSessionTimeout, take the session's
// own idle_session_timeout (set by the role, the database or the
// connection's parameters): the server ends the session, and frees the
// lock, once it has been idle that long, whether or not the Lock asked.
// The Lock must then ping often enough to keep it, and have its deadline.
func serverTimeout(ctx context.Context, conn *pgx.Conn, o options) (options, error) {
	if o.timeout != 0 {
		return o, nil
	}
	var ms int64 // none before PostgreSQL 14
	err := conn.QueryRow(ctx, "SELECT COALESCE((SELECT setting::bigint FROM pg_settings WHERE name = 'idle_session_timeout'), 0)").Scan(&ms)
	if err != nil {
		return o, fmt.Errorf("pgadvisory: reading idle_session_timeout: %w", err)
	}
	if ms <= 0 {
		return o, nil
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case !o.setIntvl:
		o.interval = min(DefaultPingInterval, d/3)
	case o.interval > d/2:
		return o, fmt.Errorf("pgadvisory: WithPingInterval %v is over half of the session's idle_session_timeout %v: the server would end a live session", o.interval, d)
	}
	o.timeout = d
	return o, nil
}
