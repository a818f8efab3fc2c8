// Package migrations reads a schema's numbered steps, up and down, from
// files, for the schema packages of each database (pgschema, mysqlschema),
// which apply them each in its own database's way.
package migrations

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered step of a schema.
type Migration struct {
	Version  int
	Name     string
	Up, Down string // SQL, with $TABLE and $NAME
}

// Load reads the migrations in fsys: files NNNN_name.up.sql and
// NNNN_name.down.sql, numbered 1, 2, ... without gaps, each with both.
func Load(fsys fs.FS) ([]Migration, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*Migration{}
	for _, f := range files {
		num, rest, ok := strings.Cut(f, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q is not NNNN_name.up.sql or .down.sql", f)
		}
		name, dir, ok := strings.Cut(strings.TrimSuffix(rest, ".sql"), ".")
		if !ok || dir != "up" && dir != "down" {
			return nil, fmt.Errorf("migration file %q is not NNNN_name.up.sql or .down.sql", f)
		}
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		m := byVersion[v]
		if m == nil {
			m = &Migration{Version: v, Name: name}
			byVersion[v] = m
		}
		if dir == "up" {
			m.Up = string(b)
		} else {
			m.Down = string(b)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		switch {
		case m.Version != i+1:
			return nil, fmt.Errorf("migration %d is missing", i+1)
		case m.Up == "" || m.Down == "":
			return nil, fmt.Errorf("migration %d needs both an up and a down file", m.Version)
		}
	}
	return out, nil
}

// MustLoad is Load of the directory dir of fsys, for migrations embedded
// in a module, whose tests load them: it panics on an error.
func MustLoad(fsys fs.FS, dir string) []Migration {
	sub, err := fs.Sub(fsys, dir)
	if err == nil {
		var ms []Migration
		if ms, err = Load(sub); err == nil {
			return ms
		}
	}
	panic(err)
}

// Expander replaces $TABLE with quoted, the table's name as the database
// quotes it, and $NAME with name, its name without a schema, unquoted.
func Expander(quoted, name string) func(string) string {
	return strings.NewReplacer("$TABLE", quoted, "$NAME", name).Replace
}

// UpSQL is every step's up SQL, expanded, in order: the whole schema, for
// those who apply it with their own migration tool.
func UpSQL(ms []Migration, expand func(string) string) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(expand(m.Up))
	}
	return b.String()
}
