package outbox

import (
	"context"
	"time"
)

// database is what an Outbox and its relays do in their table, in the SQL
// of one database: PostgreSQL (postgres.go) or MySQL and MariaDB
// (mysql.go). Everything above it (delivery, senders, backoff, hooks) is
// the same on both.
type database interface {
	migrate(ctx context.Context, to int, down bool) error
	// insert writes a message through q, the caller's transaction or
	// connection, of the type the database takes; it reports one of
	// another type.
	insert(ctx context.Context, q any, id string, m Message, header []byte) error
	state(ctx context.Context, id string) (State, error)
	// backlog is the pending messages' count and the oldest's age.
	backlog(ctx context.Context) (pending int64, oldest time.Duration, err error)
	// lease takes up to n due messages that no other relay holds, counts
	// their delivery and pushes their due time lease ahead.
	lease(ctx context.Context, n int, lease time.Duration) ([]leased, error)
	// delivered records accepted deliveries, in one statement.
	delivered(ctx context.Context, ids []string, codes []int32) error
	// retry and dead record a failed delivery, if the message is still at
	// that delivery (a relay whose lease passed records nothing).
	retry(ctx context.Context, f failure, wait time.Duration) error
	dead(ctx context.Context, f failure) error
	// listen wakes the relay each time a message is committed, until ctx
	// ends or the connection fails. A database without notifications
	// returns errNoNotifications at once: its relays poll.
	listen(ctx context.Context, wake func()) error
}

// failure is a failed delivery to record.
type failure struct {
	id         string
	status     *int
	lastErr    string
	deliveries int
}
