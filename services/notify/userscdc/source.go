package userscdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/services/notify"
)

// sourceDDL is the users' database as the monolith keeps it: a user (with
// the club they belong to), their notification settings per type and
// channel (a row per switch they touched; no row: on), and their devices
// (one row per push token, keyed by a surrogate id, as an ORM makes it).
// %[1]s is the schema.
const sourceDDL = `
CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE IF NOT EXISTS %[1]s.users (
	id       bigint PRIMARY KEY,
	name     text NOT NULL,
	language text NOT NULL DEFAULT '',
	email    text,
	opt_out  boolean NOT NULL DEFAULT false,
	club_id  bigint
);
CREATE INDEX IF NOT EXISTS users_club ON %[1]s.users (club_id);
CREATE TABLE IF NOT EXISTS %[1]s.user_settings (
	user_id bigint NOT NULL REFERENCES %[1]s.users (id) ON DELETE CASCADE,
	type    text NOT NULL,
	channel text NOT NULL CHECK (channel IN ('push', 'email')),
	enabled boolean NOT NULL,
	PRIMARY KEY (user_id, type, channel)
);
CREATE TABLE IF NOT EXISTS %[1]s.user_devices (
	id       bigserial PRIMARY KEY,
	user_id  bigint NOT NULL REFERENCES %[1]s.users (id) ON DELETE CASCADE,
	token    text NOT NULL,
	platform text NOT NULL DEFAULT 'android' CHECK (platform IN ('ios', 'android'))
);
CREATE INDEX IF NOT EXISTS user_devices_user ON %[1]s.user_devices (user_id);
`

// Source is the users' database, the monolith's side: it creates the
// tables and writes to them (tests and the benchmark play the monolith).
type Source struct {
	Pool   *pgxpool.Pool
	Schema string
}

// OpenSource connects to the users' database at url and creates the
// schema and its tables if they are missing.
func OpenSource(ctx context.Context, url, schema string) (*Source, error) {
	if schema == "" {
		schema = "public"
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("userscdc: source: %w", err)
	}
	s := &Source{Pool: pool, Schema: schema}
	if _, err := pool.Exec(ctx, fmt.Sprintf(sourceDDL, pgx.Identifier{schema}.Sanitize())); err != nil {
		pool.Close()
		return nil, fmt.Errorf("userscdc: create source tables in %s: %w", schema, err)
	}
	return s, nil
}

// Close closes the pool.
func (s *Source) Close() { s.Pool.Close() }

// Table is the schema-qualified name of a source table: "users",
// "user_settings" or "user_devices".
func (s *Source) Table(name string) string { return pgx.Identifier{s.Schema, name}.Sanitize() }

// Write runs fn in one transaction and returns a position at or after its
// commit: once a view reflects it, the view has the transaction.
func (s *Source) Write(ctx context.Context, fn func(w *Writer) error) (LSN, error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return fn(&Writer{ctx: ctx, Tx: tx, s: s}) })
	if err != nil {
		return 0, err
	}
	var lsn LSN
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()`).Scan(&lsn); err != nil {
		return 0, err
	}
	return lsn, nil
}

// Writer writes one transaction's changes.
type Writer struct {
	ctx context.Context
	Tx  pgx.Tx
	s   *Source
}

// Exec runs sql in the transaction; {users}, {settings} and {devices}
// cannot be used, name tables with Table.
func (w *Writer) Exec(sql string, args ...any) error {
	_, err := w.Tx.Exec(w.ctx, sql, args...)
	return err
}

// Table is Source.Table.
func (w *Writer) Table(name string) string { return w.s.Table(name) }

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// PutUser inserts or updates u's users row (not its settings or devices).
func (w *Writer) PutUser(u *notify.User, clubID int64) error {
	return w.Exec(`INSERT INTO `+w.Table(tableUsers)+` (id, name, language, email, opt_out, club_id) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, language = excluded.language, email = excluded.email,
		opt_out = excluded.opt_out, club_id = excluded.club_id`,
		u.ID, u.Name, u.Language, nullIfEmpty(u.Email), u.OptOut, clubID)
}

// DeleteUser deletes a user, and by cascade their settings and devices.
func (w *Writer) DeleteUser(id int64) error {
	return w.Exec(`DELETE FROM `+w.Table(tableUsers)+` WHERE id = $1`, id)
}

// SetSetting switches a user's notifications of a type on a channel.
func (w *Writer) SetSetting(userID int64, typ string, c notify.Channel, enabled bool) error {
	return w.Exec(`INSERT INTO `+w.Table(tableSettings)+` (user_id, type, channel, enabled) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = excluded.enabled`, userID, typ, string(c), enabled)
}

// DeleteSetting removes a setting's row (the switch is on again).
func (w *Writer) DeleteSetting(userID int64, typ string, c notify.Channel) error {
	return w.Exec(`DELETE FROM `+w.Table(tableSettings)+` WHERE user_id = $1 AND type = $2 AND channel = $3`, userID, typ, string(c))
}

// AddDevice adds a push token to a user and returns the device's id.
func (w *Writer) AddDevice(userID int64, token string) (int64, error) {
	var id int64
	err := w.Tx.QueryRow(w.ctx, `INSERT INTO `+w.Table(tableDevices)+` (user_id, token) VALUES ($1, $2) RETURNING id`, userID, token).Scan(&id)
	return id, err
}

// DeleteDevice removes a device.
func (w *Writer) DeleteDevice(id int64) error {
	return w.Exec(`DELETE FROM `+w.Table(tableDevices)+` WHERE id = $1`, id)
}

// Users reads every user from the source tables in one snapshot, as the
// view should have them: the straightforward recomputation tests compare
// the view with.
func (s *Source) Users(ctx context.Context) (map[int64]*notify.User, error) {
	out := map[int64]*notify.User{}
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return querySourceUsers(ctx, tx, s.Table, nil, out)
	})
	if err != nil {
		return nil, fmt.Errorf("userscdc: read source users: %w", err)
	}
	return out, nil
}

// querier runs queries: a connection, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// querySourceUsers reads users from the source tables into out as the view
// gives them back: the same fields, the settings switched off only, device
// tokens by device id. ids nil reads every user, otherwise those among ids.
func querySourceUsers(ctx context.Context, q querier, table func(string) string, ids []int64, out map[int64]*notify.User) error {
	var args []any
	among := func(col string) string {
		if ids == nil {
			return ""
		}
		return " AND " + col + " = ANY($1)"
	}
	if ids != nil {
		args = []any{ids}
	}
	rows, err := q.Query(ctx, `SELECT id, name, language, coalesce(email, ''), opt_out FROM `+table(tableUsers)+` WHERE true`+among("id"), args...)
	if err != nil {
		return err
	}
	var u notify.User
	if _, err := pgx.ForEachRow(rows, []any{&u.ID, &u.Name, &u.Language, &u.Email, &u.OptOut}, func() error {
		c := u
		out[u.ID] = &c
		return nil
	}); err != nil {
		return err
	}
	rows, err = q.Query(ctx, `SELECT user_id, type, channel FROM `+table(tableSettings)+` WHERE NOT enabled`+among("user_id"), args...)
	if err != nil {
		return err
	}
	var id int64
	var typ, channel, token string
	if _, err := pgx.ForEachRow(rows, []any{&id, &typ, &channel}, func() error {
		if u := out[id]; u != nil {
			if u.Disabled == nil {
				u.Disabled = map[notify.Setting]bool{}
			}
			u.Disabled[notify.Setting{Type: typ, Channel: notify.Channel(channel)}] = true
		}
		return nil
	}); err != nil {
		return err
	}
	rows, err = q.Query(ctx, `SELECT user_id, token FROM `+table(tableDevices)+` WHERE true`+among("user_id")+` ORDER BY id`, args...)
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&id, &token}, func() error {
		if u := out[id]; u != nil {
			u.DeviceTokens = append(u.DeviceTokens, token)
		}
		return nil
	})
	return err
}

// Population describes generated users.
type Population struct {
	Users   int     // ids 1..Users
	Clubs   int     // users are spread over clubs 1..Clubs (default 100)
	Type    string  // the notification type some users refuse
	Refuse  float64 // the share of users who turned Type off on every channel
	OptOut  float64 // the share who opted out of everything
	NoEmail float64 // the share without an e-mail address
	NoPush  float64 // the share without a device
	Seed    uint64
}

// Generate fills the (empty) source tables with p's users by COPY.
func (s *Source) Generate(ctx context.Context, p Population) error {
	if p.Clubs <= 0 {
		p.Clubs = 100
	}
	rng := rand.New(rand.NewPCG(p.Seed, 2))
	langs := []string{"en", "en", "nl", "de", "es", ""}
	var users, settings, devices [][]any
	for id := int64(1); id <= int64(p.Users); id++ {
		var email any
		if rng.Float64() >= p.NoEmail {
			email = "user" + strconv.FormatInt(id, 10) + "@example.org"
		}
		users = append(users, []any{id, "User " + strconv.FormatInt(id, 10), langs[rng.IntN(len(langs))], email,
			rng.Float64() < p.OptOut, 1 + id%int64(p.Clubs)})
		if p.Type != "" && rng.Float64() < p.Refuse {
			for _, c := range notify.Channels {
				settings = append(settings, []any{id, p.Type, string(c), false})
			}
		}
		if rng.Float64() >= p.NoPush {
			for range 1 + rng.IntN(2) {
				devices = append(devices, []any{id, fmt.Sprintf("tok-%d-%016x", id, rng.Uint64())})
			}
		}
	}
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		for _, c := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{tableUsers, []string{"id", "name", "language", "email", "opt_out", "club_id"}, users},
			{tableSettings, []string{"user_id", "type", "channel", "enabled"}, settings},
			{tableDevices, []string{"user_id", "token"}, devices},
		} {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.Schema, c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
				return fmt.Errorf("userscdc: generate %s: %w", c.table, err)
			}
		}
		return nil
	})
}

// Lookup reads users by id straight from the source tables, each call in
// one read-only snapshot: a notify.Users for processes that keep no view
// of their own (the stage deployment's preference and build processes,
// which read the users' database or a replica of it, as the published
// system's functions read a search index fed by CDC).
func (s *Source) Lookup(ctx context.Context, ids []int64) (map[int64]*notify.User, error) {
	out := make(map[int64]*notify.User, len(ids))
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for start := 0; start < len(ids); start += lookupChunk {
			if err := querySourceUsers(ctx, tx, s.Table, ids[start:min(start+lookupChunk, len(ids))], out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("userscdc: look users up: %w", err)
	}
	return out, nil
}

// LookupUsers is Source.Lookup as a notify.Users.
type LookupUsers struct{ Source *Source }

// Users implements notify.Users.
func (l LookupUsers) Users(ctx context.Context, ids []int64) (map[int64]*notify.User, error) {
	return l.Source.Lookup(ctx, ids)
}
