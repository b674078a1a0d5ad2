-- name: SetBalanceFenced :execrows
-- Every fenced statement carries the predicate fence <= @token and sets
-- fence = @token: a write with an older token than one the row has
-- accepted matches no row and changes nothing.
UPDATE accounts SET balance = @balance, fence = @token
WHERE id = @id AND fence <= @token;

-- name: PutAccountFenced :execrows
-- The first write, or any write, of a row that may not exist yet: an
-- insert, or an update of the row only if its fence lets the token in.
INSERT INTO accounts (id, balance, fence) VALUES (@id, @balance, @token)
ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence
WHERE accounts.fence <= EXCLUDED.fence;

-- name: ClaimAccount :one
-- Raises the row's fence to the token and reads it: no older token's
-- write lands after this read.
UPDATE accounts SET fence = @token
WHERE id = @id AND fence <= @token
RETURNING *;

-- name: ReadFence :one
-- After a fenced statement changed no row: no row is a missing account,
-- a fence above the token a stale write.
SELECT fence FROM accounts WHERE id = @id;

-- name: GetAccount :one
-- An unfenced read, for the tests and for reading back after an unknown
-- outcome.
SELECT * FROM accounts WHERE id = @id;

-- name: SetBalance :exec
-- UNFENCED: the control of docs/sqlc's tests. Never write like this
-- under a lock.
UPDATE accounts SET balance = @balance WHERE id = @id;
