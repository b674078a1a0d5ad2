// Package pgtag is how a fenced PostgreSQL transaction shows its tokens to
// the others: as its session's application_name, set for the transaction
// alone by each statement that claims a fence. A newer holder whose claim
// that transaction blocks reads it in pg_stat_activity and ends the
// session when the transaction is older on what they share
// (fence/postgres's and fence/sql's preemption).
//
// A tag is "fencelock:t=LO-HI;E;E…": the range of every token the
// transaction claimed with, then one entry per claim, "HASH:TOKEN", HASH
// the first six hex digits of the MD5 of the claimed resource's name (the
// room is application_name's 63 bytes). When an entry no longer fits, the
// entries give way to "+": the range alone is known from then on.
package pgtag

import (
	"crypto/md5"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Prefix starts the application_name of a fenced transaction.
const Prefix = "fencelock:t="

// maxLen is the longest application_name PostgreSQL keeps.
const maxLen = 63

// HashLen is how many hex digits of a resource's MD5 an entry keeps.
const HashLen = 6

// Hash is the hash an entry names resource by.
func Hash(resource string) string {
	sum := md5.Sum([]byte(resource))
	return hex.EncodeToString(sum[:])[:HashLen]
}

// Entry is the entry of a claim of resource with token.
func Entry(resource string, token int64) string {
	return Hash(resource) + ":" + strconv.FormatInt(token, 10)
}

// HashSQL is the SQL expression of [Hash] of the text expression name.
func HashSQL(name string) string {
	return "substr(md5(" + name + "), 1, " + strconv.Itoa(HashLen) + ")"
}

// EntrySQL is the SQL expression of [Entry] of the text expression name
// and the bigint expression token.
func EntrySQL(name, token string) string {
	return HashSQL(name) + " || ':' || (" + token + ")::bigint::text"
}

// SQL is the SQL expression that sets the tag of a transaction to take in
// a claim, computed by the server ([Merge] computes it in the client, as
// fence/postgres does; fence/sql, which sees no ParameterStatus through
// database/sql, uses this): the tokens from the bigint expressions lo to
// hi, and entries, a text expression of one or more entries joined by ";"
// (see [Entry], [EntrySQL]). The range and the entries the transaction has
// so far (from an earlier claim) are kept. Its value is the new tag.
func SQL(lo, hi, entries string) string {
	const cur = "current_setting('application_name')"
	const tagged = "(" + cur + " ~ '^" + Prefix + "[0-9]+-[0-9]+(;.*)?$')"
	old := func(re string) string {
		return "CASE WHEN " + tagged + " THEN substring(" + cur + " from '" + re + "') END"
	}
	head := "'" + Prefix + "' || least((" + lo + ")::bigint, (" + old("^"+Prefix+"([0-9]+)-") + ")::bigint)::text || '-' || greatest((" +
		hi + ")::bigint, (" + old("^"+Prefix+"[0-9]+-([0-9]+)") + ")::bigint)::text"
	oldEntries := old(";(.*)$")
	es := "CASE WHEN " + oldEntries + " = '+' THEN '+' ELSE coalesce(" + oldEntries + " || ';', '') || (" + entries + ") END"
	return "set_config('application_name', (SELECT h || ';' || CASE WHEN length(h || ';' || e) <= " + strconv.Itoa(maxLen) +
		" THEN e ELSE '+' END FROM (SELECT " + head + " AS h, " + es + " AS e) AS fencelock_tag), true)"
}

// tagged matches the application_name of a session in a fenced
// transaction, as [SQL] tells it: the range, then the entries, if any,
// after the first ";".
var tagged = regexp.MustCompile(`(?s)^` + regexp.QuoteMeta(Prefix) + `([0-9]+)-([0-9]+)(;(.*))?$`)

// Merge is the tag [SQL] sets, computed in the client: cur is the
// session's application_name (as the server reports it to the client
// after each statement), lo and hi the range of the claim's tokens, and
// entries its entries joined by ";". It saves the server [SQL]'s regular
// expressions, which cost a statement more than the rest of a claim. A
// range in cur too large for a bigint, on which [SQL] fails, is taken for
// no tag.
func Merge(cur string, lo, hi int64, entries string) string {
	e := entries
	if m := tagged.FindStringSubmatch(cur); m != nil {
		oldLo, errLo := strconv.ParseInt(m[1], 10, 64)
		oldHi, errHi := strconv.ParseInt(m[2], 10, 64)
		if errLo == nil && errHi == nil {
			lo, hi = min(lo, oldLo), max(hi, oldHi)
			switch {
			case m[3] == "":
			case m[4] == "+":
				e = "+"
			default:
				e = m[4] + ";" + entries
			}
		}
	}
	h := Prefix + strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)
	if utf8.RuneCountInString(h+";"+e) > maxLen {
		e = "+"
	}
	return h + ";" + e
}

// Tag is a fenced transaction's tag, parsed.
type Tag struct {
	Lo, Hi int64
	// Entries maps a resource's hash to the tokens the transaction
	// claimed it with; Complete is false when they gave way to "+".
	Entries  map[string][]int64
	Complete bool
}

// Parse returns a fenced transaction's tag; ok is false for a session
// that is not in one.
func Parse(tag string) (t Tag, ok bool) {
	rest, found := strings.CutPrefix(tag, Prefix)
	if !found {
		return Tag{}, false
	}
	rng, entries, _ := strings.Cut(rest, ";")
	a, b, found := strings.Cut(rng, "-")
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if !found || errA != nil || errB != nil || x <= 0 || y < x {
		return Tag{}, false
	}
	t = Tag{Lo: x, Hi: y, Entries: map[string][]int64{}, Complete: entries != "+"}
	if entries == "+" || entries == "" {
		return t, true
	}
	for _, e := range strings.Split(entries, ";") {
		h, tok, found := strings.Cut(e, ":")
		v, err := strconv.ParseInt(tok, 10, 64)
		if !found || len(h) != HashLen || err != nil {
			return Tag{Lo: x, Hi: y, Entries: map[string][]int64{}}, true // unreadable entries: the range alone
		}
		t.Entries[h] = append(t.Entries[h], v)
	}
	return t, true
}

// Covers reports whether a claim of the resource whose hash is hash with
// token would tell the others nothing t does not: its token is in t's
// range, and t names the resource with it, or names no resource at all
// (its entries gave way). A transaction whose tag covers a claim need not
// tag it again.
func (t Tag) Covers(hash string, token int64) bool {
	if token < t.Lo || token > t.Hi {
		return false
	}
	return !t.Complete || slices.Contains(t.Entries[hash], token)
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

// Waiter is what a waiting claim knows of its own transaction: its claims,
// and, when it has a holder that knows, whether that holder still holds
// them all.
type Waiter struct {
	Claims []Claim     // at least one
	Valid  func() bool // nil: unknown
}

// Claim is one claim of a [Waiter]: its resource's [Hash] and its token.
type Claim struct {
	Hash  string
	Token int64
}

// Ends reports whether w ends a blocker whose tag is t. A blocker holds
// the row of a resource the waiter claims (that is what the claim waits
// for), under a token of its own there.
//
// The blocker's tag names its claims' resources (by hash) and tokens: one
// that claimed a resource the waiter claims with an older token, and none
// with the waiter's token or a newer one, is a past holder there, and is
// ended; one that claimed some with the same token (the same holder's own
// transaction) or a newer one (the waiter is the stale one) is left alone.
// When its tag names none of the waiter's resources, or its entries gave
// way to its range alone: a blocker older than every token of the waiter
// is a past holder; one older than the waiter's newest token only, and
// whose range holds none of the waiter's tokens, is one too when the
// waiter still holds all its locks; any other is left alone.
func (w Waiter) Ends(t Tag) bool {
	first, last := w.Claims[0].Token, w.Claims[0].Token
	for _, c := range w.Claims {
		first, last = min(first, c.Token), max(last, c.Token)
	}
	if t.Hi < first {
		return true
	}
	if t.Complete {
		shared := false
		for _, c := range w.Claims {
			for _, b := range t.Entries[c.Hash] {
				if b >= c.Token {
					return false
				}
				shared = true
			}
		}
		if shared {
			return true
		}
	}
	if t.Hi >= last || w.Valid == nil {
		return false
	}
	for _, c := range w.Claims {
		if t.Lo <= c.Token && c.Token <= t.Hi {
			return false
		}
	}
	return w.Valid()
}
