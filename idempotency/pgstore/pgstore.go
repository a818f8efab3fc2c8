// Package pgstore keeps idempotency records in PostgreSQL, for several
// processes behind one endpoint, and offers the strongest guarantee the
// field knows: in transactional mode the handler writes its side effect in
// the same transaction that stores the response, so the two commit or roll
// back together and a crash anywhere leaves neither a duplicate nor a lost
// effect.
//
// Create the table with Store.Migrate or the SQL of Schema. Expired rows
// are ignored by every query but not deleted by them: call Store.Sweep
// periodically (a cron job, or a ticker in your service) to reclaim space;
// expires_at is indexed for it.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/idempotency"
)

// DefaultTable is the table New uses when given "".
const DefaultTable = "idempotency_keys"

// Schema is the migration for DefaultTable; SchemaFor gives it for another.
var Schema = SchemaFor(DefaultTable)

// SchemaFor returns the CREATE statements for the records table and the
// index on expires_at the sweeper uses. table must be a valid name (see
// New).
func SchemaFor(table string) string {
	t := quote(table)
	idx := quote(strings.ReplaceAll(table, ".", "_") + "_expires_at")
	if i := strings.LastIndex(table, "."); i >= 0 {
		idx = quote(table[i+1:] + "_expires_at")
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	key         text PRIMARY KEY,
	fingerprint text NOT NULL,
	owner       text NOT NULL,
	done        boolean NOT NULL DEFAULT false,
	status      integer,
	header      jsonb,
	body        bytea,
	too_large   boolean NOT NULL DEFAULT false,
	expires_at  timestamptz NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS %s ON %s (expires_at);`, t, idx, t)
}

var validTable = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

func quote(table string) string {
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

// Store is an idempotency.TxStore on PostgreSQL. It is safe for concurrent
// use.
type Store struct {
	pool  *pgxpool.Pool
	table string // as given, validated

	claim, complete, release, sweep string
}

// New returns a Store on table ("" means DefaultTable; "schema.table" is
// accepted). It does not create the table: see Migrate.
func New(pool *pgxpool.Pool, table string) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	if table == "" {
		table = DefaultTable
	}
	if !validTable.MatchString(table) {
		return nil, fmt.Errorf("pgstore: invalid table name %q", table)
	}
	t := quote(table)
	return &Store{
		pool:  pool,
		table: table,
		// An expired row is taken over as if absent; a live one is left
		// alone, and then read back. $4 and $7 are microseconds.
		// One round trip: take the key if it is free or expired, otherwise
		// read the live record. The read sees the statement's snapshot, so
		// a record committed by a concurrent claimer after it began is not
		// seen; then no row comes back, and Claim asks again.
		claim: `WITH taken AS (
	INSERT INTO ` + t + ` AS r (key, fingerprint, owner, expires_at)
	VALUES ($1, $2, $3, now() + $4 * interval '1 microsecond')
	ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, owner = EXCLUDED.owner,
		done = false, status = NULL, header = NULL, body = NULL, too_large = false,
		expires_at = EXCLUDED.expires_at, created_at = now()
	WHERE r.expires_at <= now()
	RETURNING 1
)
SELECT true, '', false, NULL::integer, NULL::jsonb, NULL::bytea, false FROM taken
UNION ALL
SELECT false, fingerprint, done, status, header, body, too_large FROM ` + t + `
WHERE key = $1 AND expires_at > now() AND NOT EXISTS (SELECT 1 FROM taken)`,
		complete: `UPDATE ` + t + ` SET done = true, status = $3, header = $4, body = $5, too_large = $6,
	expires_at = now() + $7 * interval '1 microsecond'
WHERE key = $1 AND owner = $2 AND NOT done AND expires_at > now()`,
		release: `DELETE FROM ` + t + ` WHERE key = $1 AND owner = $2 AND NOT done`,
		sweep:   `DELETE FROM ` + t + ` WHERE expires_at <= now()`,
	}, nil
}

// Migrate creates the table and its index if they do not exist.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, SchemaFor(s.table))
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}

// Sweep deletes expired records and reports how many.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.sweep)
	if err != nil {
		return 0, fmt.Errorf("pgstore: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Claim implements idempotency.Store.
func (s *Store) Claim(ctx context.Context, key, fingerprint, owner string, lock time.Duration) (*idempotency.Record, error) {
	// A live row can vanish or appear between our snapshot and the
	// conflict check (released, expired, or committed by a concurrent
	// claimer); then nothing comes back and the key is asked for again.
	for range 5 {
		var (
			taken    bool
			rec      idempotency.Record
			done     bool
			status   *int32
			header   []byte
			body     []byte
			tooLarge bool
		)
		err := s.pool.QueryRow(ctx, s.claim, key, fingerprint, owner, lock.Microseconds()).
			Scan(&taken, &rec.Fingerprint, &done, &status, &header, &body, &tooLarge)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pgstore: claim: %w", err)
		}
		if taken {
			return nil, nil
		}
		if done {
			resp := &idempotency.Response{Body: body, TooLarge: tooLarge}
			if status != nil {
				resp.Status = int(*status)
			}
			if len(header) > 0 {
				if err := json.Unmarshal(header, &resp.Header); err != nil {
					return nil, fmt.Errorf("pgstore: malformed header of %s: %w", key, err)
				}
			}
			rec.Response = resp
		}
		return &rec, nil
	}
	return nil, errors.New("pgstore: claim: key changed hands too often; retry")
}

// execer is what Complete needs of a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *Store) completeOn(ctx context.Context, db execer, key, owner string, resp *idempotency.Response, retention time.Duration) error {
	header, err := json.Marshal(resp.Header)
	if err != nil {
		return err
	}
	if resp.Header == nil {
		header = []byte("{}")
	}
	tag, err := db.Exec(ctx, s.complete, key, owner, resp.Status, header, resp.Body, resp.TooLarge, retention.Microseconds())
	if err != nil {
		return fmt.Errorf("pgstore: complete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrNotOwner
	}
	return nil
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, resp *idempotency.Response, retention time.Duration) error {
	return s.completeOn(ctx, s.pool, key, owner, resp, retention)
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, key, owner string) error {
	if _, err := s.pool.Exec(ctx, s.release, key, owner); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	return nil
}

type txKey struct{}

// Tx returns the transaction the middleware opened for this request in
// transactional mode, or nil outside it. Write the side effect through it:
// it commits together with the stored response, or not at all.
func Tx(ctx context.Context) pgx.Tx {
	tx, _ := ctx.Value(txKey{}).(pgx.Tx)
	return tx
}

// Begin implements idempotency.TxStore.
func (s *Store) Begin(ctx context.Context, key, owner string) (idempotency.Tx, context.Context, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, ctx, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &storeTx{s: s, tx: tx, key: key, owner: owner}, context.WithValue(ctx, txKey{}, tx), nil
}

type storeTx struct {
	s          *Store
	tx         pgx.Tx
	key, owner string
}

func (t *storeTx) Commit(ctx context.Context, resp *idempotency.Response, retention time.Duration) error {
	if err := t.s.completeOn(ctx, t.tx, t.key, t.owner, resp, retention); err != nil {
		t.tx.Rollback(ctx)
		return err
	}
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	return nil
}

func (t *storeTx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

var _ idempotency.TxStore = (*Store)(nil)
