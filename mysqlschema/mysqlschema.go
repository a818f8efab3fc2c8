// Package mysqlschema is what the MySQL and MariaDB modules of retryhttp
// (mysqlstore) share about their schemas: table names a user may choose,
// and numbered migrations, up and down, applied under a named lock
// (GET_LOCK) so that every replica of a service may run them at once on
// deploy. It needs only database/sql: the driver is the caller's
// (go-sql-driver/mysql).
//
// A module keeps its migrations as files NNNN_name.up.sql and
// NNNN_name.down.sql in an fs.FS (embedded), numbered from 1 without gaps,
// in which $TABLE stands for the quoted table and $NAME for the table's
// name without its database, unquoted, for naming indexes. A file may hold
// several statements, each ended by a semicolon at the end of a line.
// Applied versions are kept in the table retryhttp_schema_versions, one
// row per table.
//
// MySQL and MariaDB commit each DDL statement on its own (no
// transactional DDL), so a step is not atomic with its record: write each
// up step so that running it again after a crash midway creates nothing
// twice (CREATE TABLE IF NOT EXISTS, with its indexes inside it, works on
// both), and each down step so (DROP ... IF EXISTS).
package mysqlschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/retryhttp/retryhttp/shared/migrations"
)

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// ValidName reports whether name is a table name the modules accept: an
// identifier, optionally qualified by a database ("db.table"), at most 64
// characters a part, as MySQL allows.
func ValidName(name string) bool {
	if !validName.MatchString(name) {
		return false
	}
	for _, part := range strings.Split(name, ".") {
		if len(part) > 64 {
			return false
		}
	}
	return true
}

// Quote returns name quoted as SQL identifiers, each part on its own. A
// valid name holds no backquote.
func Quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, ".")
}

// base is name without its database.
func base(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// Migration is one numbered step of a schema.
type Migration = migrations.Migration

// Load reads the migrations in fsys: files NNNN_name.up.sql and
// NNNN_name.down.sql, numbered 1, 2, ... without gaps, each with both.
func Load(fsys fs.FS) ([]Migration, error) {
	ms, err := migrations.Load(fsys)
	if err != nil {
		return nil, fmt.Errorf("mysqlschema: %w", err)
	}
	return ms, nil
}

// MustLoad is Load of the directory dir of fsys, for migrations embedded
// in a module, whose tests load them: it panics on an error.
func MustLoad(fsys fs.FS, dir string) []Migration { return migrations.MustLoad(fsys, dir) }

func expander(table string) func(string) string {
	return migrations.Expander(Quote(table), base(table))
}

// UpSQL is every step's up SQL for table, in order: the whole schema, for
// those who apply it with their own migration tool.
func UpSQL(ms []Migration, table string) string { return migrations.UpSQL(ms, expander(table)) }

var statementEnd = regexp.MustCompile(`;[ \t]*(\n|$)`)

// statements splits a step's SQL into its statements: each ends with a
// semicolon at the end of a line.
func statements(sqlText string) []string {
	var out []string
	for _, s := range statementEnd.Split(sqlText, -1) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// MigrateParams say what Migrate does.
type MigrateParams struct {
	// Table is the table the migrations create and change, as the user
	// named it (see ValidName).
	Table string
	// Migrations are the schema's steps, from Load.
	Migrations []Migration
	// Lock names the lock concurrent Migrates take (GET_LOCK, at most 64
	// characters); "" means "retryhttp schema " + Table, cut to 64.
	Lock string
	// LockWait is how long Migrate waits for another's lock; 0 means
	// DefaultLockWait.
	LockWait int
	// To is the version to reach. Applying, 0 means the last.
	To int
	// Down reverts the steps above To (0: every step) instead of
	// applying the ones up to it.
	Down bool
}

// DefaultLockWait is how many seconds Migrate waits for the lock of a
// concurrent Migrate: longer than any of the modules' steps take.
const DefaultLockWait = 60

// versionsTable keeps the applied version of each table.
const versionsTable = "retryhttp_schema_versions"

// Migrate brings p.Table to version p.To under a named lock taken on the
// table's name (GET_LOCK, on one connection held for the whole run), so
// that concurrent Migrates (replicas starting at once) apply each step
// once. It returns the version reached. The version is recorded after
// each step. A table created before versions were kept counts as version
// 0 and is brought up by the same steps, which create nothing twice; so
// does a table dropped since it was migrated.
func Migrate(ctx context.Context, db *sql.DB, p MigrateParams) (int, error) {
	v, err := migrate(ctx, db, p)
	if err != nil {
		return 0, fmt.Errorf("mysqlschema: migrate %s: %w", p.Table, err)
	}
	return v, nil
}

func migrate(ctx context.Context, db *sql.DB, p MigrateParams) (int, error) {
	if !ValidName(p.Table) {
		return 0, fmt.Errorf("invalid table name %q", p.Table)
	}
	last := len(p.Migrations)
	to := p.To
	if to == 0 && !p.Down {
		to = last
	}
	if to < 0 || to > last {
		return 0, fmt.Errorf("no version %d of %s (versions 0 to %d)", to, p.Table, last)
	}
	lock := p.Lock
	if lock == "" {
		lock = "retryhttp schema " + p.Table
	}
	if len(lock) > 64 {
		lock = lock[:64]
	}
	wait := p.LockWait
	if wait == 0 {
		wait = DefaultLockWait
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, lock, wait).Scan(&got); err != nil {
		return 0, err
	}
	if !got.Valid || got.Int64 != 1 {
		return 0, fmt.Errorf("the lock %q was held for %d s by another migration", lock, wait)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, lock)

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+versionsTable+
		` (name VARCHAR(130) CHARACTER SET ascii COLLATE ascii_bin PRIMARY KEY, version INT NOT NULL)`); err != nil {
		return 0, err
	}
	var cur int
	err = conn.QueryRowContext(ctx, `SELECT version FROM `+versionsTable+` WHERE name = ?`, p.Table).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	if cur > 0 {
		// A table dropped by hand (a test's cleanup, a reset) has no
		// schema left, whatever the record says.
		schema, table := "", p.Table
		if i := strings.IndexByte(p.Table, '.'); i >= 0 {
			schema, table = p.Table[:i], p.Table[i+1:]
		}
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
WHERE table_schema = IF(? = '', DATABASE(), ?) AND table_name = ?`, schema, schema, table).Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 {
			cur = 0
		}
	}
	if cur > last {
		return 0, fmt.Errorf("%s is at version %d, newer than this code's %d: deploy the newer code, or migrate down with it", p.Table, cur, last)
	}
	expand := expander(p.Table)
	record := func(v int) error {
		_, err := conn.ExecContext(ctx, `INSERT INTO `+versionsTable+` (name, version) VALUES (?, ?)
ON DUPLICATE KEY UPDATE version = VALUES(version)`, p.Table, v)
		return err
	}
	run := func(v int, dir, text string) error {
		for _, stmt := range statements(expand(text)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %d %s: %w", v, dir, err)
			}
		}
		return nil
	}
	reached := cur
	for v := cur + 1; v <= to && !p.Down; v++ {
		if err := run(v, "up", p.Migrations[v-1].Up); err != nil {
			return 0, err
		}
		if err := record(v); err != nil {
			return 0, err
		}
		reached = v
	}
	for v := cur; v > to && p.Down; v-- {
		if err := run(v, "down", p.Migrations[v-1].Down); err != nil {
			return 0, err
		}
		if err := record(v - 1); err != nil {
			return 0, err
		}
		reached = v - 1
	}
	if reached == cur {
		if err := record(cur); err != nil { // a table found without a record
			return 0, err
		}
	}
	return reached, nil
}
