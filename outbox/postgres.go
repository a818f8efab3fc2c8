package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/pgschema"
)

// postgres is an outbox table on PostgreSQL, through a pgx pool.
type postgres struct {
	pool    *pgxpool.Pool
	table   string
	channel string // LISTEN/NOTIFY channel

	insertSQL, leaseSQL, deliveredSQL, retrySQL, deadSQL string
}

// pgExecer is what Enqueue writes through on PostgreSQL.
type pgExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func newPostgres(pool *pgxpool.Pool, table string) *postgres {
	t := quote(table)
	return &postgres{
		pool:      pool,
		table:     table,
		channel:   strings.ReplaceAll(table, ".", "_") + "_new",
		insertSQL: `INSERT INTO ` + t + ` (id, method, url, header, body) VALUES ($1, $2, $3, $4, $5)`,
		// Lease a batch: the due messages no other relay holds, their
		// delivery counted and their due time pushed past the lease, all in
		// one statement.
		leaseSQL: `UPDATE ` + t + ` SET next_at = now() + $2 * interval '1 microsecond', deliveries = deliveries + 1
WHERE id IN (SELECT id FROM ` + t + ` WHERE status = 'pending' AND next_at <= now()
	ORDER BY next_at LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, method, url, header, body, deliveries`,
		// A batch's deliveries are recorded in one statement: one commit,
		// one WAL flush, however many messages.
		deliveredSQL: `UPDATE ` + t + ` AS m SET status = 'delivered', delivered_at = now(), last_status = d.code, last_error = NULL
FROM unnest($1::text[], $2::integer[]) AS d(id, code)
WHERE m.id = d.id AND m.status = 'pending'`,
		retrySQL: `UPDATE ` + t + ` SET next_at = now() + $2 * interval '1 microsecond', last_status = $3, last_error = $4
WHERE id = $1 AND status = 'pending' AND deliveries = $5`,
		deadSQL: `UPDATE ` + t + ` SET status = 'dead', last_status = $2, last_error = $3
WHERE id = $1 AND status = 'pending' AND deliveries = $4`,
	}
}

func (p *postgres) migrate(ctx context.Context, to int, down bool) error {
	_, err := pgschema.Migrate(ctx, p.pool, pgschema.MigrateParams{Table: p.table, Migrations: migrations, Lock: "retryhttp outbox " + p.table, To: to, Down: down})
	return err
}

func (p *postgres) insert(ctx context.Context, q any, id string, m Message, header []byte) error {
	db, ok := q.(pgExecer)
	if !ok {
		return fmt.Errorf("an outbox on PostgreSQL writes through a pgx.Tx, a pool or a connection (pgx's Exec), not a %T", q)
	}
	if _, err := db.Exec(ctx, p.insertSQL, id, m.Method, m.URL, header, m.Body); err != nil {
		return err
	}
	// Delivered to listeners when (and only if) the transaction commits.
	_, err := db.Exec(ctx, `SELECT pg_notify($1, '')`, p.channel)
	return err
}

func (p *postgres) state(ctx context.Context, id string) (State, error) {
	var s State
	var last *int32
	var lastErr *string
	err := p.pool.QueryRow(ctx, `SELECT status, deliveries, last_status, last_error FROM `+quote(p.table)+` WHERE id = $1`, id).
		Scan(&s.Status, &s.Deliveries, &last, &lastErr)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, err
	}
	if last != nil {
		s.LastStatus = int(*last)
	}
	if lastErr != nil {
		s.LastError = *lastErr
	}
	return s, nil
}

func (p *postgres) backlog(ctx context.Context) (int64, time.Duration, error) {
	var n int64
	var oldest float64
	err := p.pool.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
FROM `+quote(p.table)+` WHERE status = 'pending'`).Scan(&n, &oldest)
	return n, time.Duration(oldest * float64(time.Second)), err
}

func (p *postgres) lease(ctx context.Context, n int, lease time.Duration) ([]leased, error) {
	rows, err := p.pool.Query(ctx, p.leaseSQL, n, lease.Microseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var batch []leased
	for rows.Next() {
		var m leased
		var header []byte
		if err := rows.Scan(&m.id, &m.method, &m.url, &header, &m.body, &m.deliveries); err != nil {
			return nil, err
		}
		m.header = parseHeader(header)
		batch = append(batch, m)
	}
	return batch, rows.Err()
}

func (p *postgres) delivered(ctx context.Context, ids []string, codes []int32) error {
	_, err := p.pool.Exec(ctx, p.deliveredSQL, ids, codes)
	return err
}

func (p *postgres) retry(ctx context.Context, f failure, wait time.Duration) error {
	_, err := p.pool.Exec(ctx, p.retrySQL, f.id, wait.Microseconds(), f.status, f.lastErr, f.deliveries)
	return err
}

func (p *postgres) dead(ctx context.Context, f failure) error {
	_, err := p.pool.Exec(ctx, p.deadSQL, f.id, f.status, f.lastErr, f.deliveries)
	return err
}

// listen holds one connection of the pool for LISTEN, taken out of the
// pool for good.
func (p *postgres) listen(ctx context.Context, wake func()) error {
	pc, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // LISTEN stays with the connection: never give it back to the pool
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{p.channel}.Sanitize()); err != nil {
		return err
	}
	wake() // catch up with what was committed before we listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
