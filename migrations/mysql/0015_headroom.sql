-- Room a new message row carries for the columns its state changes fill in
-- (issue 31). InnoDB rewrites a record in its own place on its page when an
-- UPDATE leaves it no longer; a longer record is moved, and on a full page
-- the page is reorganised and logged whole: a commit, then a SENT mark, each
-- wrote 3 to 7 KB of redo per message that way. A prepare writes 40 bytes
-- here, a decision cuts them to 16 and the SENT mark to none, so neither
-- makes the record longer. Never read.
ALTER TABLE messages ADD COLUMN headroom VARBINARY(64) NULL;
