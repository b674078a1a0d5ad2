-- The accounts table of docs/sqlc.md. fence is the highest token that has
-- written the row; it starts below every token.
CREATE TABLE accounts (
    id      text   PRIMARY KEY,
    balance bigint NOT NULL,
    fence   bigint NOT NULL DEFAULT 0
);
