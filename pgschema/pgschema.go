// Package pgschema is what the PostgreSQL modules of retryhttp (pgstore,
// outbox) share about their schemas: table names a user may choose, and
// numbered migrations, up and down, applied under an advisory lock so that
// every replica of a service may run them at once on deploy, as River's
// migrations are.
//
// A module keeps its migrations as files NNNN_name.up.sql and
// NNNN_name.down.sql in an fs.FS (embedded), numbered from 1 without gaps,
// in which $TABLE stands for the quoted table and $NAME for the table's
// name without its schema, unquoted, for naming indexes ("$NAME_at"; a
// valid name needs no escaping inside the quotes). Applied versions are kept
// in the table retryhttp_schema_versions, one row per table.
package pgschema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/retryhttp/retryhttp/shared/migrations"
)

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// ValidName reports whether name is a table name the modules accept: an
// identifier, optionally qualified by a schema ("schema.table").
func ValidName(name string) bool { return validName.MatchString(name) }

// Quote returns name quoted as SQL identifiers, each part on its own.
func Quote(name string) string { return pgx.Identifier(strings.Split(name, ".")).Sanitize() }

// base is name without its schema.
func base(name string) string {
	if i := strings.LastIndex(name, "."); i >= 0 {
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
		return nil, fmt.Errorf("pgschema: %w", err)
	}
	return ms, nil
}

func expander(table string) func(string) string {
	return migrations.Expander(Quote(table), base(table))
}

// UpSQL is every step's up SQL for table, in order: the whole schema, for
// those who apply it with their own migration tool.
func UpSQL(ms []Migration, table string) string { return migrations.UpSQL(ms, expander(table)) }

// MustLoad is Load of the directory dir of fsys, for migrations embedded
// in a module, whose tests load them: it panics on an error.
func MustLoad(fsys fs.FS, dir string) []Migration { return migrations.MustLoad(fsys, dir) }

// Beginner is what Migrate runs in: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// MigrateParams say what Migrate does.
type MigrateParams struct {
	// Table is the table the migrations create and change, as the user
	// named it (see ValidName).
	Table string
	// Migrations are the schema's steps, from Load.
	Migrations []Migration
	// Lock names the advisory lock concurrent Migrates take; "" means
	// "retryhttp schema " + Table. A module keeps the name its earlier
	// releases locked with, so old and new replicas exclude each other.
	Lock string
	// To is the version to reach. Applying, 0 means the last.
	To int
	// Down reverts the steps above To (0: every step) instead of
	// applying the ones up to it.
	Down bool
}

// versionsTable keeps the applied version of each table.
const versionsTable = "retryhttp_schema_versions"

// Migrate brings p.Table to version p.To, in one transaction under an
// advisory lock taken on the table's name, so that concurrent Migrates
// (replicas starting at once) apply each step once. It returns the version
// reached. A table created before versions were kept (by CREATE ... IF NOT
// EXISTS) counts as version 0 and is brought up by the same steps, which
// create nothing twice; so does a table dropped since it was migrated.
func Migrate(ctx context.Context, db Beginner, p MigrateParams) (int, error) {
	if !ValidName(p.Table) {
		return 0, fmt.Errorf("pgschema: invalid table name %q", p.Table)
	}
	last := len(p.Migrations)
	to := p.To
	if to == 0 && !p.Down {
		to = last
	}
	if to < 0 || to > last {
		return 0, fmt.Errorf("pgschema: no version %d of %s (versions 0 to %d)", to, p.Table, last)
	}
	expand := expander(p.Table)
	lock := p.Lock
	if lock == "" {
		lock = "retryhttp schema " + p.Table
	}
	var reached int
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versionsTable+` (name text PRIMARY KEY, version integer NOT NULL)`); err != nil {
			return err
		}
		var cur int
		err := tx.QueryRow(ctx, `SELECT version FROM `+versionsTable+` WHERE name = $1`, p.Table).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if cur > 0 {
			// A table dropped by hand (a test's cleanup, a reset) has no
			// schema left, whatever the record says.
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, Quote(p.Table)).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				cur = 0
			}
		}
		if cur > last {
			return fmt.Errorf("pgschema: %s is at version %d, newer than this code's %d: deploy the newer code, or migrate down with it", p.Table, cur, last)
		}
		for v := cur + 1; v <= to && !p.Down; v++ {
			if _, err := tx.Exec(ctx, expand(p.Migrations[v-1].Up)); err != nil {
				return fmt.Errorf("migration %d up: %w", v, err)
			}
		}
		for v := cur; v > to && p.Down; v-- {
			if _, err := tx.Exec(ctx, expand(p.Migrations[v-1].Down)); err != nil {
				return fmt.Errorf("migration %d down: %w", v, err)
			}
		}
		reached = cur
		if p.Down && to < cur || !p.Down && to > cur {
			reached = to
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+versionsTable+` (name, version) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET version = excluded.version`, p.Table, reached)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgschema: migrate %s: %w", p.Table, err)
	}
	return reached, nil
}
