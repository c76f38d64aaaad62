-- One overdue flag per kind of wait, where 0003 had one for both: a message that was alerted
-- verify_overdue while PREPARED must still be alerted send_overdue if its send then waits too
-- long. An operator's redeliver clears the send flag and a re-verify the verify flag, so a
-- message put back in its queue is alerted again if it waits too long again, counted from then:
-- `requeued_at` is when an operator last did so (NULL: never), so a thousand messages redelivered
-- after an outage are not all overdue the moment they are back.
--
-- What the old flag meant is carried over by state: on a COMMITTED row it is taken as the send
-- alert (a send that waited is what usually sets it there; a row alerted verify_overdue and
-- committed late is at worst not alerted again for its send), on any other row as the check-back
-- alert (only PREPARED rows were ever alerted verify_overdue, and only COMMITTED ones
-- send_overdue).
ALTER TABLE messages
    ADD COLUMN send_overdue_alerted BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN verify_overdue_alerted BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN requeued_at DATETIME(3) NULL;

UPDATE messages SET send_overdue_alerted = TRUE WHERE overdue_alerted AND status = 'COMMITTED';
UPDATE messages SET verify_overdue_alerted = TRUE WHERE overdue_alerted AND status <> 'COMMITTED';

ALTER TABLE messages DROP COLUMN overdue_alerted;
