-- Delivery at a chosen time: see mysql/0010_deliver_at.sql. INTEGER ms since the epoch, NULL: none.
ALTER TABLE messages ADD COLUMN deliver_at INTEGER;
