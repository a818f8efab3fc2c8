package outbox

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/mysqlschema"
)

// mysqlMigrationFiles are the outbox table's schema on MySQL and MariaDB.
//
//go:embed mysql_migrations/*.sql
var mysqlMigrationFiles embed.FS

var mysqlMigrations = mysqlschema.MustLoad(mysqlMigrationFiles, "mysql_migrations") // checked by TestMySQLMigrations

// MySQLSchemaFor is SchemaFor for an outbox on MySQL or MariaDB.
func MySQLSchemaFor(table string) string { return mysqlschema.UpSQL(mysqlMigrations, table) }

// NewMySQL returns an Outbox on table ("" means DefaultTable; "db.table"
// is accepted) of db, a *sql.DB opened with go-sql-driver/mysql, on MySQL
// 8.0 or later or MariaDB 10.6 or later (the relays lease with FOR UPDATE
// SKIP LOCKED). It does not create the table: see Migrate.
//
// Everything the package doc says holds, with two differences. Enqueue
// writes through database/sql (a *sql.Tx: mysqlstore.Tx in the
// middleware's transactional mode). And MySQL has no LISTEN/NOTIFY: a
// relay finds committed messages by polling, every
// RelayOptions.PollInterval (1 s by default; shorten it for a lower
// latency, at one indexed query per interval per relay).
func NewMySQL(db *sql.DB, table string) (*Outbox, error) {
	if db == nil {
		return nil, errors.New("outbox: nil db")
	}
	if table == "" {
		table = DefaultTable
	}
	if !mysqlschema.ValidName(table) {
		return nil, fmt.Errorf("outbox: invalid table name %q", table)
	}
	return &Outbox{db: newMySQL(db, table), table: table}, nil
}

// mysqlDB is an outbox table on MySQL or MariaDB, through database/sql.
// Times are the database's (UTC_TIMESTAMP(6)), as on PostgreSQL.
type mysqlDB struct {
	db    *sql.DB
	table string
	t     string // quoted

	insertSQL, selectSQL, retrySQL, deadSQL string
}

// sqlExecer is what Enqueue writes through on MySQL.
type sqlExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func newMySQL(db *sql.DB, table string) *mysqlDB {
	t := mysqlschema.Quote(table)
	return &mysqlDB{
		db:    db,
		table: table,
		t:     t,
		insertSQL: `INSERT INTO ` + t + ` (id, method, url, header, body, next_at, created_at)
VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
		// A relay's lease: the due messages no other relay holds, skipped
		// rather than waited for.
		selectSQL: `SELECT id, method, url, header, body, deliveries FROM ` + t + `
WHERE status = 'pending' AND next_at <= UTC_TIMESTAMP(6) ORDER BY next_at LIMIT ? FOR UPDATE SKIP LOCKED`,
		retrySQL: `UPDATE ` + t + ` SET next_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, last_status = ?, last_error = ?
WHERE id = ? AND status = 'pending' AND deliveries = ?`,
		deadSQL: `UPDATE ` + t + ` SET status = 'dead', last_status = ?, last_error = ?
WHERE id = ? AND status = 'pending' AND deliveries = ?`,
	}
}

func (m *mysqlDB) migrate(ctx context.Context, to int, down bool) error {
	_, err := mysqlschema.Migrate(ctx, m.db, mysqlschema.MigrateParams{Table: m.table, Migrations: mysqlMigrations, Lock: "retryhttp outbox " + m.table, To: to, Down: down})
	return err
}

func (m *mysqlDB) insert(ctx context.Context, q any, id string, msg Message, header []byte) error {
	db, ok := q.(sqlExecer)
	if !ok {
		return fmt.Errorf("an outbox on MySQL writes through a *sql.Tx, *sql.DB or *sql.Conn (database/sql's ExecContext), not a %T", q)
	}
	body := msg.Body
	if body == nil {
		body = []byte{}
	}
	_, err := db.ExecContext(ctx, m.insertSQL, id, msg.Method, msg.URL, header, body)
	return err
}

func (m *mysqlDB) state(ctx context.Context, id string) (State, error) {
	var s State
	var last sql.NullInt32
	var lastErr sql.NullString
	err := m.db.QueryRowContext(ctx, `SELECT status, deliveries, last_status, last_error FROM `+m.t+` WHERE id = ?`, id).
		Scan(&s.Status, &s.Deliveries, &last, &lastErr)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, err
	}
	s.LastStatus, s.LastError = int(last.Int32), lastErr.String
	return s, nil
}

func (m *mysqlDB) backlog(ctx context.Context) (int64, time.Duration, error) {
	var n, oldest int64
	err := m.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0)
FROM `+m.t+` WHERE status = 'pending'`).Scan(&n, &oldest)
	return n, time.Duration(oldest) * time.Microsecond, err
}

// lease selects and updates in one transaction, since MySQL's UPDATE has
// no RETURNING. It runs at READ COMMITTED, where a locking read takes no
// gap locks, so that a lease does not hold up the Enqueues committing
// meanwhile.
func (m *mysqlDB) lease(ctx context.Context, n int, lease time.Duration) (batch []leased, err error) {
	tx, err := m.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, m.selectSQL, n)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var l leased
		var header []byte
		if err := rows.Scan(&l.id, &l.method, &l.url, &header, &l.body, &l.deliveries); err != nil {
			rows.Close()
			return nil, err
		}
		l.header = parseHeader(header)
		l.deliveries++
		batch = append(batch, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return nil, tx.Commit()
	}
	args := make([]any, 0, 1+len(batch))
	args = append(args, lease.Microseconds())
	for _, l := range batch {
		args = append(args, l.id)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+m.t+` SET next_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, deliveries = deliveries + 1
WHERE id IN (`+placeholders(len(batch))+`)`, args...); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return batch, nil
}

// delivered records a batch in one statement, its statuses by CASE.
func (m *mysqlDB) delivered(ctx context.Context, ids []string, codes []int32) error {
	var b strings.Builder
	args := make([]any, 0, 3*len(ids))
	b.WriteString(`UPDATE ` + m.t + ` SET status = 'delivered', delivered_at = UTC_TIMESTAMP(6), last_error = NULL, last_status = CASE id`)
	for i, id := range ids {
		b.WriteString(` WHEN ? THEN ?`)
		args = append(args, id, codes[i])
	}
	b.WriteString(` END WHERE status = 'pending' AND id IN (` + placeholders(len(ids)) + `)`)
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := m.db.ExecContext(ctx, b.String(), args...)
	return err
}

func (m *mysqlDB) retry(ctx context.Context, f failure, wait time.Duration) error {
	_, err := m.db.ExecContext(ctx, m.retrySQL, wait.Microseconds(), f.status, f.lastErr, f.id, f.deliveries)
	return err
}

func (m *mysqlDB) dead(ctx context.Context, f failure) error {
	_, err := m.db.ExecContext(ctx, m.deadSQL, f.status, f.lastErr, f.id, f.deliveries)
	return err
}

func (m *mysqlDB) listen(context.Context, func()) error { return errNoNotifications }

// placeholders is n question marks, comma-separated.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
