-- The MySQL schema's `headroom` (its migration 0015), so that statements
-- both backends share may give it back. SQLite rewrites a row whole whatever
-- its length: here it is always NULL and costs nothing.
ALTER TABLE messages ADD COLUMN headroom BLOB NULL;
