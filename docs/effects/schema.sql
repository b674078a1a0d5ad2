CREATE TABLE IF NOT EXISTS orders (
    id     text PRIMARY KEY,
    status text NOT NULL,
    amount bigint NOT NULL
);
INSERT INTO orders (id, status, amount) VALUES ('order-42', 'open', 1999) ON CONFLICT (id) DO NOTHING;
