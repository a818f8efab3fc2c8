// Package mysqlstore keeps idempotency records in MySQL or MariaDB, for
// several processes behind one endpoint, through database/sql (with
// go-sql-driver/mysql), and offers what pgstore offers on PostgreSQL: in
// transactional mode the handler writes its side effect in the same
// transaction that stores the response, so the two commit or roll back
// together.
//
// Create the table with Store.Migrate (safe to run from every replica at
// once: a named lock, GET_LOCK, serialises concurrent runs) or the SQL of
// Schema. Expired rows are ignored by every statement but not deleted by
// them: call Store.Sweep from a ticker of your service or a cron job to
// reclaim space, in batches; expires_at is indexed for it.
//
// Tested on MariaDB 10.11. Every statement is also MySQL 8.0's: the
// schema (DATETIME(6), VARBINARY keys, the index inside CREATE TABLE, as
// MySQL has no CREATE INDEX IF NOT EXISTS), UTC_TIMESTAMP(6) and
// TIMESTAMPDIFF for the database's clock, GET_LOCK for migrations, and
// DELETE ... ORDER BY ... LIMIT for the sweep. One differs in warnings
// only: the migrations' version record uses VALUES() in ON DUPLICATE KEY
// UPDATE, which MySQL 8.0.20 and later accept with a deprecation warning
// and MariaDB requires.
//
// Atomicity. A claim is an INSERT of the key: the primary key lets one of
// many concurrent INSERTs of a free key succeed and fails the others
// (duplicate key, 1062), which then read the live record. There is no
// check-then-act: the read only follows a refused INSERT. An expired
// record is taken over by an UPDATE whose WHERE requires it still
// expired; InnoDB evaluates an UPDATE's WHERE on the latest committed row
// under its exclusive lock, whatever the isolation level, so one claimer
// alone takes it. Extensions, completions and releases are UPDATEs and
// DELETEs conditioned on the caller's owner token in the same way. Every
// statement runs on its own (autocommit) at the server's default
// isolation (REPEATABLE READ); the plain read of a live record sees the
// latest committed version, as a statement's own snapshot does. Times are
// the database's (UTC_TIMESTAMP(6)), so the clocks of the service's
// machines need not agree, and DATETIME columns in UTC are unaffected by
// the session's time zone.
//
// In transactional mode a request holds a pooled connection from the
// handler's first Tx call to its commit (see Tx): size the pool
// (SetMaxOpenConns) for it, with room for the claims and extensions of
// the requests waiting. Open the DSN with interpolateParams=true: without
// it go-sql-driver prepares every statement that has arguments, a round
// trip more each (a new key is then four, not two).
package mysqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/mysqlschema"
)

// DefaultTable is the table New uses when given "".
const DefaultTable = "idempotency_keys"

// migrationFiles are the table's schema, numbered steps up and down (see
// package mysqlschema).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = mysqlschema.MustLoad(migrationFiles, "migrations") // checked by TestMigrations

// Schema is the schema for DefaultTable; SchemaFor gives it for another.
var Schema = SchemaFor(DefaultTable)

// SchemaFor returns the statement that creates the records table with the
// index on expires_at the sweep uses, every migration's up step, for those
// who apply schemas with their own tool. table must be a valid name (see
// New).
func SchemaFor(table string) string { return mysqlschema.UpSQL(migrations, table) }

// Store is an idempotency.TxStore on MySQL or MariaDB. It is safe for
// concurrent use.
type Store struct {
	db    *sql.DB
	table string // as given, validated

	insert, read, takeover, extend, owns, complete, release, sweep string
}

// New returns a Store on table ("" means DefaultTable; "db.table" is
// accepted) of db, a *sql.DB opened with the "mysql" driver of
// go-sql-driver/mysql. It does not create the table: see Migrate.
func New(db *sql.DB, table string) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysqlstore: nil db")
	}
	if table == "" {
		table = DefaultTable
	}
	if !mysqlschema.ValidName(table) {
		return nil, fmt.Errorf("mysqlstore: invalid table name %q", table)
	}
	t := mysqlschema.Quote(table)
	const live = `expires_at > UTC_TIMESTAMP(6)`
	return &Store{
		db:    db,
		table: table,
		// A new key is this one statement; a key already there fails it
		// (1062) and is read. Durations are microseconds.
		insert: `INSERT INTO ` + t + ` (idem_key, fingerprint, owner, expires_at, created_at)
VALUES (?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6))`,
		read: `SELECT fingerprint, owner, done, status, header, body, too_large,
	TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM ` + t + ` WHERE idem_key = ?`,
		takeover: `UPDATE ` + t + ` SET fingerprint = ?, owner = ?, done = FALSE, status = NULL, header = NULL,
	body = NULL, too_large = FALSE, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, created_at = UTC_TIMESTAMP(6)
WHERE idem_key = ? AND expires_at <= UTC_TIMESTAMP(6)`,
		extend: `UPDATE ` + t + ` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE idem_key = ? AND owner = ? AND NOT done AND ` + live,
		owns: `SELECT 1 FROM ` + t + ` WHERE idem_key = ? AND owner = ? AND NOT done AND ` + live,
		complete: `UPDATE ` + t + ` SET done = TRUE, status = ?, header = ?, body = ?, too_large = ?,
	expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE idem_key = ? AND owner = ? AND NOT done AND ` + live,
		release: `DELETE FROM ` + t + ` WHERE idem_key = ? AND owner = ? AND NOT done`,
		sweep:   `DELETE FROM ` + t + ` WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ?`,
	}, nil
}

// Migrate brings the table to the latest version of its schema (see
// package mysqlschema: numbered steps under a named lock). It is safe to
// run from every replica at start-up.
func (s *Store) Migrate(ctx context.Context) error {
	if _, err := mysqlschema.Migrate(ctx, s.db, mysqlschema.MigrateParams{Table: s.table, Migrations: migrations, Lock: "retryhttp mysqlstore " + s.table}); err != nil {
		return fmt.Errorf("mysqlstore: %w", err)
	}
	return nil
}

// MigrateDown reverts the table's schema to version to (0: drops it), for
// a rollback of this module.
func (s *Store) MigrateDown(ctx context.Context, to int) error {
	if _, err := mysqlschema.Migrate(ctx, s.db, mysqlschema.MigrateParams{Table: s.table, Migrations: migrations, Lock: "retryhttp mysqlstore " + s.table, To: to, Down: true}); err != nil {
		return fmt.Errorf("mysqlstore: %w", err)
	}
	return nil
}

// Sweep batches: each DELETE removes at most SweepBatch rows, the oldest
// expired first, and the next waits SweepPause, so that no statement holds
// locks or grows the undo log for long and the requests keep the database.
const (
	SweepBatch = 1000
	SweepPause = 30 * time.Millisecond
)

// Sweep deletes expired records, SweepBatch rows a statement, until none
// is left or ctx ends, and reports how many it deleted.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, s.sweep, SweepBatch)
		if err != nil {
			return total, fmt.Errorf("mysqlstore: sweep: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("mysqlstore: sweep: %w", err)
		}
		total += n
		if n < SweepBatch {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, context.Cause(ctx)
		case <-time.After(SweepPause):
		}
	}
}

// duplicate reports a duplicate-key error (ER_DUP_ENTRY).
func duplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, p idempotency.ClaimParams) (*idempotency.Record, error) {
	lock := p.Lock.Microseconds()
	// A live row can vanish or appear between the INSERT and the read
	// (released, expired, or taken over); then the key is asked for again.
	for range 5 {
		_, err := s.db.ExecContext(ctx, s.insert, p.Key, p.Fingerprint, p.Owner, lock)
		if err == nil {
			return nil, nil
		}
		if !duplicate(err) {
			return nil, fmt.Errorf("mysqlstore: claim: %w", err)
		}
		var (
			rec       idempotency.Record
			holder    string
			done      bool
			status    sql.NullInt32
			header    []byte
			body      []byte
			tooLarge  bool
			remaining int64
		)
		err = s.db.QueryRowContext(ctx, s.read, p.Key).
			Scan(&rec.Fingerprint, &holder, &done, &status, &header, &body, &tooLarge, &remaining)
		if errors.Is(err, sql.ErrNoRows) {
			continue // released or swept since the INSERT
		}
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: claim: %w", err)
		}
		switch {
		case remaining <= 0: // expired: take it over
			res, err := s.db.ExecContext(ctx, s.takeover, p.Fingerprint, p.Owner, lock, p.Key)
			if err != nil {
				return nil, fmt.Errorf("mysqlstore: claim: %w", err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				return nil, nil
			}
			continue // another claimer took it first
		case !done && holder == p.Owner:
			return nil, nil // ours already: a repeated Claim
		}
		rec.Expires = time.Now().Add(time.Duration(remaining) * time.Microsecond)
		if done {
			resp := &idempotency.Response{Body: body, TooLarge: tooLarge}
			if status.Valid {
				resp.Status = int(status.Int32)
			}
			if len(header) > 0 {
				if resp.Header, err = idempotency.UnmarshalHeader(header); err != nil {
					return nil, fmt.Errorf("mysqlstore: malformed header of %s: %w", p.Key, err)
				}
			}
			rec.Response = resp
		}
		return &rec, nil
	}
	return nil, errors.New("mysqlstore: claim: key changed hands too often; retry")
}

// Extend implements idempotency.Store.
func (s *Store) Extend(ctx context.Context, p idempotency.ExtendParams) error {
	res, err := s.db.ExecContext(ctx, s.extend, p.Lock.Microseconds(), p.Key, p.Owner)
	if err != nil {
		return fmt.Errorf("mysqlstore: extend: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	// The driver counts changed rows, not matched ones: an extension to
	// the very expiry the row has changes nothing. Ask whether the claim
	// is still ours.
	var one int
	switch err := s.db.QueryRowContext(ctx, s.owns, p.Key, p.Owner).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return idempotency.ErrNotOwner
	case err != nil:
		return fmt.Errorf("mysqlstore: extend: %w", err)
	}
	return nil
}

// execer is what Complete needs of a pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) completeOn(ctx context.Context, db execer, p idempotency.CompleteParams) error {
	resp := p.Response
	header := []byte("{}")
	if resp.Header != nil {
		var err error
		if header, err = idempotency.MarshalHeader(resp.Header); err != nil {
			return err
		}
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // an empty body, not an absent one
	}
	res, err := db.ExecContext(ctx, s.complete, resp.Status, header, body, resp.TooLarge, p.Retention.Microseconds(), p.Key, p.Owner)
	if err != nil {
		return fmt.Errorf("mysqlstore: complete: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mysqlstore: complete: %w", err)
	}
	if n == 0 { // done goes from FALSE to TRUE: a matched row always changes
		return idempotency.ErrNotOwner
	}
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, p idempotency.CompleteParams) error {
	return s.completeOn(ctx, s.db, p)
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, p idempotency.ReleaseParams) error {
	if _, err := s.db.ExecContext(ctx, s.release, p.Key, p.Owner); err != nil {
		return fmt.Errorf("mysqlstore: release: %w", err)
	}
	return nil
}

type txKey struct{}

// ErrNoTx is returned by Tx outside a request that the middleware serves
// in transactional mode.
var ErrNoTx = errors.New("mysqlstore: no transaction in this context (is the middleware in transactional mode?)")

// Tx returns the transaction the middleware prepared for this request in
// transactional mode; write the side effect through it: it commits
// together with the stored response, or not at all.
//
// The transaction begins on the first call, not when the request arrives,
// so a handler that first calls another service holds no pooled
// connection meanwhile. From the first call to the commit it holds one.
// It runs at the server's default isolation (REPEATABLE READ). Outside
// transactional mode Tx returns ErrNoTx.
func Tx(ctx context.Context) (*sql.Tx, error) {
	st, _ := ctx.Value(txKey{}).(*storeTx)
	if st == nil {
		return nil, ErrNoTx
	}
	return st.begin(ctx)
}

// Begin implements idempotency.TxStore. The transaction itself begins on
// the handler's first Tx call.
func (s *Store) Begin(ctx context.Context, p idempotency.BeginParams) (idempotency.Tx, context.Context, error) {
	st := &storeTx{s: s, key: p.Key, owner: p.Owner}
	return st, context.WithValue(ctx, txKey{}, st), nil
}

type storeTx struct {
	s          *Store
	key, owner string

	mu  sync.Mutex
	tx  *sql.Tx // nil until the handler's first Tx call; guarded by mu
	err error   // the Begin error; guarded by mu
}

func (t *storeTx) begin(ctx context.Context) (*sql.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tx == nil && t.err == nil {
		// Not bound to ctx: database/sql rolls a transaction back when
		// its context ends, and the commit comes after the handler's
		// context may have.
		tx, err := t.s.db.BeginTx(context.WithoutCancel(ctx), nil)
		if err != nil {
			t.err = fmt.Errorf("mysqlstore: begin: %w", err)
		} else {
			t.tx = tx
		}
	}
	return t.tx, t.err
}

func (t *storeTx) Commit(ctx context.Context, resp *idempotency.Response, retention time.Duration) error {
	t.mu.Lock()
	tx, err := t.tx, t.err
	t.mu.Unlock()
	p := idempotency.CompleteParams{Key: t.key, Owner: t.owner, Response: resp, Retention: retention}
	switch {
	case err != nil:
		return err // the handler could not write its effect: nothing to commit
	case tx == nil: // the handler wrote nothing through the transaction
		return t.s.Complete(ctx, p)
	}
	if err := t.s.completeOn(ctx, tx, p); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mysqlstore: commit: %w", err)
	}
	return nil
}

func (t *storeTx) Rollback(context.Context) error {
	t.mu.Lock()
	tx := t.tx
	t.mu.Unlock()
	if tx == nil {
		return nil
	}
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

var _ idempotency.TxStore = (*Store)(nil)
