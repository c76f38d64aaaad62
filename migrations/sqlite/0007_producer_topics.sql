-- A producer's topic allow-list: see mysql/0007_producer_topics.sql. NULL: no list (any topic).
ALTER TABLE producers ADD COLUMN topics TEXT;
