package pgschema_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/pgschema"
	"github.com/retryhttp/retryhttp/shared/pgtest"
)

func pool(t *testing.T) *pgxpool.Pool { return pgtest.Pool(t) }

var steps = fstest.MapFS{
	"0001_create.up.sql":   {Data: []byte(`CREATE TABLE IF NOT EXISTS $TABLE (id text PRIMARY KEY);`)},
	"0001_create.down.sql": {Data: []byte(`DROP TABLE $TABLE;`)},
	"0002_index.up.sql":    {Data: []byte(`ALTER TABLE $TABLE ADD COLUMN at timestamptz; CREATE INDEX "$NAME_at" ON $TABLE (at);`)},
	"0002_index.down.sql":  {Data: []byte(`DROP INDEX "$NAME_at"; ALTER TABLE $TABLE DROP COLUMN at;`)},
}

func TestLoadChecksTheFiles(t *testing.T) {
	ms, err := pgschema.Load(steps)
	if err != nil || len(ms) != 2 || ms[1].Name != "index" {
		t.Fatalf("Load: %v %+v", err, ms)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"a gap":        {"0002_x.up.sql": {}, "0002_x.down.sql": {}},
		"no down file": {"0001_x.up.sql": {Data: []byte("x")}},
		"a bad name":   {"first.up.sql": {}},
	} {
		if _, err := pgschema.Load(fsys); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
	}
}

func columns(t *testing.T, p *pgxpool.Pool, table string) string {
	var cols []string
	rows, err := p.Query(context.Background(), `SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY column_name`, table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	return strings.Join(cols, ",")
}

// Up to the last, again (nothing to do), by eight replicas at once, down
// one step and down to nothing.
func TestMigrateUpAndDown(t *testing.T) {
	p := pool(t)
	ms, _ := pgschema.Load(steps)
	table := "pgschema_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	ctx := context.Background()
	t.Cleanup(func() {
		p.Exec(ctx, "DROP TABLE IF EXISTS "+table)
		p.Exec(ctx, "DELETE FROM retryhttp_schema_versions WHERE name = $1", table)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if v, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: table, Migrations: ms}); err != nil || v != 2 {
				errs <- fmt.Errorf("v%d %v", v, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := columns(t, p, table); got != "at,id" {
		t.Fatalf("columns %q after up", got)
	}
	if v, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: table, Migrations: ms, To: 1, Down: true}); err != nil || v != 1 {
		t.Fatalf("down to 1: v%d %v", v, err)
	}
	if got := columns(t, p, table); got != "id" {
		t.Fatalf("columns %q at version 1", got)
	}
	if v, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: table, Migrations: ms, Down: true}); err != nil || v != 0 {
		t.Fatalf("down to 0: v%d %v", v, err)
	}
	if got := columns(t, p, table); got != "" {
		t.Fatalf("columns %q at version 0: the table should be gone", got)
	}
	if v, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: table, Migrations: ms}); err != nil || v != 2 {
		t.Fatalf("up again: v%d %v", v, err)
	}
	if _, err := p.Exec(ctx, "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	if v, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: table, Migrations: ms}); err != nil || v != 2 || columns(t, p, table) != "at,id" {
		t.Fatalf("after the table was dropped by hand: v%d %v, columns %q", v, err, columns(t, p, table))
	}
	if _, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: table, Migrations: ms, To: 3}); err == nil {
		t.Fatal("a version past the last was accepted")
	}
	if _, err := pgschema.Migrate(ctx, p, pgschema.MigrateParams{Table: "bad name", Migrations: ms}); err == nil {
		t.Fatal("an invalid table name was accepted")
	}
}
