-- Who holds a row's send claim, in the exactly-once mode (issue 63): the
-- claiming instance's id, which is also its Kafka transactional.id. A
-- restarted instance gives back its own claims at once (it has fenced its
-- predecessor), and no instance takes a row another one claimed before it
-- has fenced that one (forwarder/exactly_once.rs). NULL where no
-- exactly-once forwarder claimed the row. Instant: no row is rewritten.
ALTER TABLE messages ADD COLUMN claimed_by VARCHAR(100) NULL;
