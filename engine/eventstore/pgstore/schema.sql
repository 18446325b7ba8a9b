-- logbook's event store on PostgreSQL. Every name is unqualified: the
-- store sets search_path to its schema, so several stores (tests, tenants)
-- share one database without seeing each other.

-- Events are stored by stream; where they lie in the log is recorded
-- per append, in appends. A transaction inserts its events first, in
-- parallel with other transactions, then takes the head row's lock, gives
-- each of its appends the positions after the head (one narrow row per
-- append) and commits still holding the lock: the log readers see grows
-- only at its end. See docs/ARCHITECTURE.md.
CREATE TABLE IF NOT EXISTS events (
	stream    text COLLATE "C" NOT NULL,
	seq       bigint      NOT NULL,
	id        uuid        NOT NULL,
	type      text        NOT NULL,
	version   integer     NOT NULL,
	tags      text[]      NOT NULL,
	meta      text,
	data      bytea       NOT NULL,
	PRIMARY KEY (stream, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_id ON events (id);

-- An append of count events to stream from first_seq lies at positions
-- position .. position+count-1; tags are all its events' tags.
CREATE TABLE IF NOT EXISTS appends (
	position  bigint PRIMARY KEY,
	stream    text COLLATE "C" NOT NULL,
	first_seq bigint      NOT NULL,
	count     integer     NOT NULL,
	tags      text[]      NOT NULL,
	time      timestamptz NOT NULL,
	UNIQUE (stream, first_seq)
);

CREATE TABLE IF NOT EXISTS streams (
	stream  text COLLATE "C" PRIMARY KEY,
	version bigint NOT NULL
);

CREATE TABLE IF NOT EXISTS event_tags (
	tag      text COLLATE "C" NOT NULL,
	position bigint NOT NULL,
	PRIMARY KEY (tag, position)
);

CREATE TABLE IF NOT EXISTS head (
	one      boolean PRIMARY KEY DEFAULT true CHECK (one),
	position bigint  NOT NULL
);
INSERT INTO head VALUES (true, 0) ON CONFLICT DO NOTHING;

-- An append written in one round trip guesses its streams' versions and
-- checks them here, under the streams' locks: a wrong guess fails the
-- transaction, which is then written again having read them.
CREATE OR REPLACE FUNCTION expect_versions(ok boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT ok THEN
		RAISE EXCEPTION 'stream versions are not as guessed' USING ERRCODE = 'LB001';
	END IF;
	RETURN true;
END $$;

CREATE TABLE IF NOT EXISTS snapshots (
	stream  text COLLATE "C" PRIMARY KEY,
	seq     bigint  NOT NULL,
	version integer NOT NULL,
	data    bytea   NOT NULL
);

-- How far consumers of the log outside the database have got, by name
-- (the Kafka publisher's lower bound).
CREATE TABLE IF NOT EXISTS progress (
	name     text   PRIMARY KEY,
	position bigint NOT NULL
);

-- Removed events (eventstore.Deleter, delete.go). A stream's row here
-- holds the first seq readers see (before; every seq of a hard-deleted
-- one), how it was removed (mode: 0 truncated, 1 soft-deleted, 2
-- hard-deleted), and whether events below before are still stored
-- (pending): the sweep deletes them. A hard-deleted stream's version in
-- streams also carries bit 62, so that an append to it, decided against
-- that version, is refused.
CREATE TABLE IF NOT EXISTS stream_removals (
	stream  text COLLATE "C" PRIMARY KEY,
	before  bigint   NOT NULL,
	mode    smallint NOT NULL,
	pending boolean  NOT NULL
);
CREATE INDEX IF NOT EXISTS stream_removals_pending ON stream_removals (stream) WHERE pending;

-- Retention rules: kind 's' names a stream, 'p' a prefix of stream ids.
CREATE TABLE IF NOT EXISTS retention (
	kind      "char" NOT NULL,
	name      text COLLATE "C" NOT NULL,
	max_age   bigint NOT NULL, -- nanoseconds, 0: none
	max_count bigint NOT NULL, -- 0: none
	PRIMARY KEY (kind, name)
);

-- Stores made by logbook before this layout (testdata/schema_v1.sql)
-- inserted events without a position and had a sequencer give them one
-- later, in the order of append_no; positions were a column of events.
-- Their processes must be stopped before a new one opens the store: this
-- positions what they left pending, in the order their sequencer would
-- have, records every append in appends, then drops what only they used.
-- It runs once; the advisory lock of migrate serializes it.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'events' AND column_name = 'append_no') THEN
		PERFORM 1 FROM head FOR UPDATE;
		WITH batch AS (
			SELECT e.stream, e.seq, (SELECT hd.position FROM head hd) + row_number() OVER (ORDER BY e.append_no, e.seq) AS pos
			FROM events e WHERE e.position IS NULL
		), upd AS (
			UPDATE events e SET position = b.pos, time = clock_timestamp()
			FROM batch b WHERE e.stream = b.stream AND e.seq = b.seq
			RETURNING e.position, e.tags
		)
		INSERT INTO event_tags (tag, position) SELECT t, u.position FROM upd u, unnest(u.tags) AS t;
		INSERT INTO appends (position, stream, first_seq, count, tags, time)
		SELECT min(e.position), min(e.stream), min(e.seq), count(*),
			coalesce((SELECT array_agg(DISTINCT t) FROM events x, unnest(x.tags) t WHERE x.append_no = e.append_no), '{}'),
			min(e.time)
		FROM events e GROUP BY e.append_no;
		UPDATE head SET position = (SELECT coalesce(max(e.position), 0) FROM events e);
		DROP FUNCTION IF EXISTS sequence_events(integer, text);
		DROP FUNCTION IF EXISTS append_events(text, bigint, uuid[], text[], integer[], text[], text[], bytea[]);
		DROP INDEX IF EXISTS events_pending;
		DROP INDEX IF EXISTS events_position;
		ALTER TABLE events DROP COLUMN append_no, DROP COLUMN position, DROP COLUMN time;
		DROP SEQUENCE IF EXISTS append_no;
	END IF;
END $$;
