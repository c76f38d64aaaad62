-- A producer's topic allow-list (issue 27): a JSON array of exact topic names and prefixes
-- ending in `*` (`*` alone: any topic), checked at every prepare against the cached
-- registration. NULL is a registration made before this column, or without a list: it may
-- prepare for any topic, as before, and is flagged to operators (`topics_missing`).
-- At most 100 entries of at most 249 characters each, so a TEXT (64 KiB) always holds it.
ALTER TABLE producers ADD COLUMN topics TEXT NULL;
