CREATE TABLE accounts (
    id      text   PRIMARY KEY,
    balance bigint NOT NULL,
    fence   bigint NOT NULL DEFAULT 0     -- claimed: the highest token accepted for the row
);
INSERT INTO accounts (id, balance) VALUES ('acct-A', 1000), ('acct-B', 1000);
