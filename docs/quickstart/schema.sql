CREATE TABLE accounts (
    id      text   PRIMARY KEY,           -- the key column: WithKeyColumn("id")
    balance bigint NOT NULL,
    fence   bigint NOT NULL DEFAULT 0     -- the highest token accepted for the row
);
INSERT INTO accounts (id, balance) VALUES ('acct-7', 100);
