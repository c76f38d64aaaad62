-- The payload's length in bytes, written by the prepare: a send claim takes,
-- in due order, the rows whose payloads fit the forwarder's budget (the
-- MySQL schema's migration 0016 says why). NULL for a row from before this
-- column: it counts as the largest a payload may be.
ALTER TABLE messages ADD COLUMN payload_bytes INTEGER NULL;
