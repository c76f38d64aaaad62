CREATE TABLE IF NOT EXISTS placed_orders (
    order_id     VARCHAR(128) PRIMARY KEY,
    customer     VARCHAR(255) NOT NULL,
    amount_cents BIGINT       NOT NULL
);
