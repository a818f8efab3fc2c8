package main

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/go-sql-driver/mysql"

	"github.com/retryhttp/retryhttp/idempotency/mysqlstore"
)

// mysqlBackend: the floor is a plain INSERT then a plain UPDATE of the
// same table the store uses, for a new key, and a SELECT by key for a
// replay. The DSN gets interpolateParams=true, as a service on MySQL
// sets it: without it go-sql-driver prepares every statement with
// arguments, a round trip more each.
func mysqlBackend(ctx context.Context, dsn string, conns int, child bool) (*backend, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.InterpolateParams = true
	base, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	count := &counter{}
	db := sql.OpenDB(countingConnector{base, count})
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	const table = "serverbench_idempotency"
	s, err := mysqlstore.New(db, table)
	if err == nil && !child {
		err = s.Migrate(ctx)
		if err == nil {
			_, err = db.ExecContext(ctx, "TRUNCATE TABLE "+table)
		}
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &backend{
		name:  "mysql",
		store: s,
		count: count,
		floorNew: func(ctx context.Context, k string, resp []byte) error {
			k = "floor:" + k
			if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` (idem_key, fingerprint, owner, expires_at, created_at)
VALUES (?, 'fingerprint', 'owner', UTC_TIMESTAMP(6) + INTERVAL 10 SECOND, UTC_TIMESTAMP(6))`, k); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, `UPDATE `+table+` SET done = TRUE, status = 201, header = ?, body = ?,
	expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 DAY WHERE idem_key = ?`, `{"Content-Type":["application/json"]}`, resp, k)
			return err
		},
		floorRead: func(ctx context.Context, k string) error {
			var status sql.NullInt32
			var header, body []byte
			return db.QueryRowContext(ctx, `SELECT status, header, body FROM `+table+` WHERE idem_key = ?`, k).Scan(&status, &header, &body)
		},
		close: func() {
			if !child {
				db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
				db.ExecContext(context.Background(), "DELETE FROM retryhttp_schema_versions WHERE name = ?", table)
			}
			db.Close()
		},
	}, nil
}

// countingConnector counts each statement its connections run: with
// interpolated parameters, one round trip each.
type countingConnector struct {
	driver.Connector
	c *counter
}

func (cc countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{conn.(mysqlConn), cc.c}, nil
}

// mysqlConn is what go-sql-driver's connection implements and
// database/sql uses.
type mysqlConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type countingConn struct {
	mysqlConn
	c *counter
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.c.trips.Add(1)
	c.c.commands.Add(1)
	return c.mysqlConn.ExecContext(ctx, query, args)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.c.trips.Add(1)
	c.c.commands.Add(1)
	return c.mysqlConn.QueryContext(ctx, query, args)
}
