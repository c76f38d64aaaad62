-- A message that waits far longer than it should (a send that keeps timing out, a check-back
-- that keeps being put off) is alerted once: this flag records that the alert fired, so that
-- every instance's watch, on every round, alerts each such message exactly once. Setting it
-- changes neither the state nor the version, so it never disturbs a claim in flight.
ALTER TABLE messages
    ADD COLUMN overdue_alerted BOOLEAN NOT NULL DEFAULT FALSE;
