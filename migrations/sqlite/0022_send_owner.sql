-- Who holds a row's send claim, in the exactly-once mode (issue 63;
-- mysql/0022 says why).
ALTER TABLE messages ADD COLUMN claimed_by TEXT NULL;
