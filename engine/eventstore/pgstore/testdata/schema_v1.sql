-- logbook's event store on PostgreSQL. Every name is unqualified: the
-- store sets search_path to its schema, so several stores (tests, tenants)
-- share one database without seeing each other.

-- Writers insert events without a position; one sequencer at a time gives
-- them positions, in the order of append_no, which an append draws only
-- after it holds its stream's row lock. See docs/ARCHITECTURE.md.
CREATE TABLE IF NOT EXISTS events (
	stream    text COLLATE "C" NOT NULL,
	seq       bigint      NOT NULL,
	position  bigint,
	append_no bigint      NOT NULL,
	id        uuid        NOT NULL,
	type      text        NOT NULL,
	version   integer     NOT NULL,
	tags      text[]      NOT NULL,
	meta      text,
	data      bytea       NOT NULL,
	time      timestamptz,
	PRIMARY KEY (stream, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_id ON events (id);
CREATE UNIQUE INDEX IF NOT EXISTS events_position ON events (position);
CREATE INDEX IF NOT EXISTS events_pending ON events (append_no, seq) WHERE position IS NULL;

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

CREATE TABLE IF NOT EXISTS snapshots (
	stream  text COLLATE "C" PRIMARY KEY,
	seq     bigint  NOT NULL,
	version integer NOT NULL,
	data    bytea   NOT NULL
);

CREATE SEQUENCE IF NOT EXISTS append_no;

-- How far consumers of the log outside the database have got, by name
-- (the Kafka publisher's lower bound).
CREATE TABLE IF NOT EXISTS progress (
	name     text   PRIMARY KEY,
	position bigint NOT NULL
);

-- append_events appends to one stream in one round trip. status: 0 written,
-- 1 duplicate of an earlier append (first/last seq and append_no are the
-- original's), 2 an id belongs to another append, 3 version conflict
-- (first_seq is the stream's version).
CREATE OR REPLACE FUNCTION append_events(
	p_stream text, p_expect bigint, p_ids uuid[], p_types text[], p_versions integer[],
	p_tags text[], p_meta text[], p_data bytea[])
RETURNS TABLE (status integer, first_seq bigint, last_seq bigint, append bigint)
LANGUAGE plpgsql AS $$
DECLARE
	n bigint := cardinality(p_ids);
	found bigint;
	same_stream boolean;
	dmin bigint;
	dmax bigint;
	amin bigint;
	amax bigint;
	v bigint;
	a bigint;
BEGIN
	SELECT count(*), bool_and(e.stream = p_stream), min(e.seq - u.ord), max(e.seq - u.ord),
		min(e.append_no), max(e.append_no)
	INTO found, same_stream, dmin, dmax, amin, amax
	FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord) JOIN events e ON e.id = u.id;
	IF found > 0 THEN
		IF found = n AND same_stream AND dmin = dmax AND amin = amax THEN
			RETURN QUERY SELECT 1, dmin + 1, dmin + n, amin;
		ELSE
			RETURN QUERY SELECT 2, 0::bigint, 0::bigint, 0::bigint;
		END IF;
		RETURN;
	END IF;

	IF p_expect = -1 THEN
		INSERT INTO streams AS s VALUES (p_stream, n)
		ON CONFLICT (stream) DO UPDATE SET version = s.version + n
		RETURNING s.version INTO v;
	ELSIF p_expect = 0 OR p_expect = -2 THEN
		INSERT INTO streams VALUES (p_stream, n) ON CONFLICT DO NOTHING RETURNING version INTO v;
	ELSE
		UPDATE streams SET version = version + n WHERE stream = p_stream AND version = p_expect
		RETURNING version INTO v;
	END IF;
	IF v IS NULL THEN
		RETURN QUERY SELECT 3, coalesce((SELECT s.version FROM streams s WHERE s.stream = p_stream), 0), 0::bigint, 0::bigint;
		RETURN;
	END IF;

	-- Drawn under the stream's row lock: a later append to the same
	-- stream draws a larger number, so the sequencer keeps stream order.
	a := nextval('append_no');
	INSERT INTO events (stream, seq, append_no, id, type, version, tags, meta, data)
	SELECT p_stream, v - n + u.ord, a, u.id, u.type, u.ver, string_to_array(u.tags, E'\x1f'), u.meta, u.data
	FROM unnest(p_ids, p_types, p_versions, p_tags, p_meta, p_data) WITH ORDINALITY
		AS u(id, type, ver, tags, meta, data, ord);
	RETURN QUERY SELECT 0, v - n + 1, v, a;
END $$;

-- sequence_events gives positions to the committed events that have none,
-- whole appends at a time, in append_no order, and moves the head. The
-- head row's lock makes passes serial even if two sequencers ever ran. It
-- returns the events it positioned (append_no, position, stream, tags),
-- in position order, so the sequencing process can answer its writers
-- and wake its subscribers without reading them again.
-- (Stores made before it returned rows had it return the new head.)
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = 'sequence_events' AND n.nspname = current_schema() AND p.prorettype = 'bigint'::regtype) THEN
		DROP FUNCTION sequence_events(integer, text);
	END IF;
END $$;
CREATE OR REPLACE FUNCTION sequence_events(p_max_events integer, p_channel text)
RETURNS TABLE (append_no bigint, "position" bigint, stream text, tags text[])
LANGUAGE plpgsql AS $$
DECLARE
	h bigint;
	n bigint;
	amax bigint;
BEGIN
	SELECT hd.position INTO h FROM head hd FOR UPDATE;
	-- The last append of this pass; every event of it and of the appends
	-- before it goes in, so no append is split between passes.
	SELECT max(x.append_no) INTO amax FROM (
		SELECT p.append_no FROM events p WHERE p.position IS NULL
		ORDER BY p.append_no, p.seq LIMIT p_max_events) x;
	IF amax IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
	WITH batch AS (
		SELECT e.stream, e.seq, h + row_number() OVER (ORDER BY e.append_no, e.seq) AS pos
		FROM events e
		WHERE e.position IS NULL AND e.append_no <= amax
	), upd AS (
		UPDATE events e SET position = b.pos, time = clock_timestamp()
		FROM batch b WHERE e.stream = b.stream AND e.seq = b.seq
		RETURNING e.append_no, e.position, e.stream, e.tags
	), tagged AS (
		INSERT INTO event_tags (tag, position)
		SELECT t, u.position FROM upd u, unnest(u.tags) AS t
	)
	SELECT u.append_no, u.position, u.stream::text, u.tags FROM upd u ORDER BY u.position;
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n > 0 THEN
		UPDATE head SET position = h + n;
		PERFORM pg_notify(p_channel, (h + n)::text);
	END IF;
END $$;
