// Package pgtag is how a fenced PostgreSQL transaction shows its tokens to
// the others: as its session's application_name, set for the transaction
// alone by each statement that claims a fence ("fencelock:t=MIN-MAX",
// widened by each claim). A newer holder whose claim that transaction
// blocks reads it in pg_stat_activity and ends the session when every
// token it carries is older (fence/postgres's and fence/sql's preemption).
package pgtag

import (
	"strconv"
	"strings"
)

// Prefix starts the application_name of a fenced transaction.
const Prefix = "fencelock:t="

// SQL is the SQL expression that sets the tag of a transaction to take in
// the tokens from the bigint expressions lo to hi: the range of the tag the
// transaction has so far (from an earlier claim), widened to them. Its
// value is the new tag.
func SQL(lo, hi string) string {
	const cur = "current_setting('application_name')"
	const tagged = "(" + cur + " ~ '^" + Prefix + "[0-9]+-[0-9]+$')"
	old := func(part int) string {
		return "CASE WHEN " + tagged + " THEN split_part(substr(" + cur + ", " + strconv.Itoa(len(Prefix)+1) + "), '-', " +
			strconv.Itoa(part) + ")::bigint END"
	}
	return "set_config('application_name', '" + Prefix + "' || least((" + lo + ")::bigint, " + old(1) +
		")::text || '-' || greatest((" + hi + ")::bigint, " + old(2) + ")::text, true)"
}

// Parse returns the tokens of a fenced transaction's tag; ok is false for
// a session that is not in one.
func Parse(tag string) (lo, hi int64, ok bool) {
	rest, found := strings.CutPrefix(tag, Prefix)
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if !found || errA != nil || errB != nil || x <= 0 || y < x {
		return 0, 0, false
	}
	return x, y, true
}

// BlockersSQL lists the sessions that block pid ($1; 0 when the client
// cannot know it), with their tags and transaction ids (pid, tag, xid as
// text or NULL). rows, when not empty, is a query over $2 listing the xmax
// of the rows the waiting statement claims: the sessions whose
// transactions hold them are listed too, which finds a blocker whatever
// the waiter's pid (behind a pooler), when the row existed before the
// blocker's transaction.
func BlockersSQL(rows string) string {
	q := "SELECT pid, coalesce(application_name, ''), backend_xid::text FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1))"
	if rows != "" {
		// The xmax of a row locked by several transactions is a MultiXactId,
		// whose number may be some other session's transaction id: a
		// session matched by xmax counts only while somebody waits for its
		// transaction.
		q += " OR (backend_xid IS NOT NULL AND backend_xid::text IN (" + rows + ") AND pid <> pg_backend_pid()" +
			" AND EXISTS (SELECT FROM pg_locks l WHERE l.locktype = 'transactionid' AND l.transactionid = backend_xid AND NOT l.granted))"
	}
	return q
}

// TerminateSQL ends session $1 if it still runs transaction $3 (its
// backend_xid as text) and still shows tag $2: a blocker whose transaction
// ended since it was looked at, its connection now running another's, is
// left alone.
const TerminateSQL = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity" +
	" WHERE pid = $1 AND application_name = $2 AND backend_xid::text IS NOT DISTINCT FROM $3"
