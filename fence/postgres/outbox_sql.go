package postgres

import "github.com/jackc/pgx/v5"

// unclaimedMarker is cast to bigint, and so raises an error naming it
// (then the fence's token, the effect's and the resource), when [Outbox.Record] finds an
// effect whose resource's fence does not carry the effect's token.
const unclaimedMarker = "fencelock: outbox: unclaimed/"

// outboxSQL is the statements of an [Outbox], built once by NewOutbox.
type outboxSQL struct {
	table               string // the outbox table, quoted
	create, createIndex string
	// record: $1..$6 the effects' resources, tokens, seqs, hashes,
	// destinations and payloads; $7 the channel, $8 the notification.
	record string
	// recordOne: record for one effect, in scalars rather than arrays
	// (cheaper to encode, plan and run): $1..$6 its resource, token, seq,
	// hash, destination and payload; $7 the channel, $8 the notification.
	recordOne string
	// pending: $1 partitions, $2 index, $3 resources to skip, $4 limit.
	pending string
	// settle: $1..$5 the settled effects' resources, tokens, seqs, park
	// reasons ('' delivered) and attempts; $6 the dispatcher's token.
	settle string
	// parked: $1 partitions, $2 index, $3 limit.
	parked string
	// requeue: $1 resource, $2 token, $3 seq.
	requeue string
	// privileges: the current role and what it lacks on $1, the outbox
	// table, and $2, the fence table.
	privileges string
}

// newOutboxSQL builds the statements on the outbox table quoted q, whose
// last name part is base, and the fence table quoted fences.
func newOutboxSQL(q, base, fences string) outboxSQL {
	const unnest = "unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::bytea[])"
	const scope = " AND hash % $1 = $2"
	return outboxSQL{
		table: q,
		create: "CREATE TABLE IF NOT EXISTS " + q + " (id bigserial PRIMARY KEY," +
			" resource text NOT NULL, token bigint NOT NULL CHECK (token > 0), seq bigint NOT NULL CHECK (seq >= 0)," +
			" hash bigint NOT NULL, destination text NOT NULL, payload bytea NOT NULL," +
			" recorded_at timestamptz NOT NULL DEFAULT now(), delivered_by bigint, settled_at timestamptz," +
			" parked_reason text, attempts integer NOT NULL DEFAULT 0, UNIQUE (resource, token, seq))",
		createIndex: "CREATE INDEX IF NOT EXISTS " + quoteIdentTrunc(base+"_pending") + " ON " + q + " (id) WHERE settled_at IS NULL",
		// The claim CTE locks each resource's fence row FOR SHARE (a no-op
		// on a row the transaction raised itself): until the transaction
		// ends no newer holder can claim the resource, so the effects
		// commit before any newer holder's write. An effect whose fence
		// does not carry its token fails the whole statement.
		record: "WITH claim AS (SELECT resource, token FROM " + fences + " WHERE resource = ANY($1::text[]) FOR SHARE)," +
			" ins AS (INSERT INTO " + q + " (resource, token, seq, hash, destination, payload)" +
			" SELECT e.r, CASE WHEN c.token = e.t THEN e.t ELSE ('" + unclaimedMarker + "' || coalesce(c.token, 0) || '/' || e.t || '/' || e.r)::bigint END," +
			" e.s, e.h, e.d, e.p FROM " + unnest + " WITH ORDINALITY AS e(r, t, s, h, d, p, i)" +
			" LEFT JOIN claim c ON c.resource = e.r ORDER BY e.i RETURNING 1)" +
			" SELECT pg_notify($7, $8) FROM (SELECT count(*) FROM ins) AS n",
		recordOne: "WITH claim AS (SELECT token FROM " + fences + " WHERE resource = $1::text FOR SHARE)" +
			" INSERT INTO " + q + " (resource, token, seq, hash, destination, payload)" +
			" SELECT $1, CASE WHEN c.token = $2::bigint THEN $2 ELSE ('" + unclaimedMarker + "' || coalesce(c.token, 0) || '/' || $2 || '/' || $1)::bigint END," +
			" $3::bigint, $4::bigint, $5::text, $6::bytea FROM (SELECT) AS one LEFT JOIN claim c ON true RETURNING pg_notify($7, $8)",
		pending: "SELECT resource, token, seq, destination, payload FROM " + q +
			" WHERE settled_at IS NULL" + scope + " AND resource <> ALL($3::text[]) ORDER BY id LIMIT $4",
		settle: "UPDATE " + q + " AS o SET delivered_by = $6, settled_at = now(), parked_reason = nullif(s.reason, ''), attempts = s.att" +
			" FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::integer[]) AS s(r, t, seq, reason, att)" +
			" WHERE o.resource = s.r AND o.token = s.t AND o.seq = s.seq AND o.settled_at IS NULL",
		parked: "SELECT resource, token, seq, destination, payload, parked_reason, attempts FROM " + q +
			" WHERE parked_reason IS NOT NULL AND settled_at IS NOT NULL" + scope + " ORDER BY id LIMIT $3",
		requeue: "UPDATE " + q + " SET settled_at = NULL, delivered_by = NULL, parked_reason = NULL" +
			" WHERE resource = $1 AND token = $2 AND seq = $3 AND parked_reason IS NOT NULL AND settled_at IS NOT NULL",
		privileges: "SELECT current_user::text, coalesce(array_agg(p.what || ' on ' || p.tbl ORDER BY p.i)" +
			" FILTER (WHERE NOT has_table_privilege(p.tbl, p.what)), '{}')" +
			" FROM (VALUES (1, 'SELECT', $1::text), (2, 'UPDATE', $1), (3, 'SELECT', $2::text), (4, 'INSERT', $2), (5, 'UPDATE', $2))" +
			" AS p(i, what, tbl)",
	}
}

// quoteIdentTrunc quotes name, cut to PostgreSQL's 63 bytes (as the server
// would cut it) on a rune boundary.
func quoteIdentTrunc(name string) string {
	for len(name) > maxIdentLen {
		r := []rune(name)
		name = string(r[:len(r)-1])
	}
	return pgx.Identifier{name}.Sanitize()
}
