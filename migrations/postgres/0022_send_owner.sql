-- Who holds a row's send claim, in the exactly-once mode (issue 63;
-- mysql/0022 says why). Adds no default: no row is rewritten.
ALTER TABLE messages ADD COLUMN claimed_by VARCHAR(100) NULL;
