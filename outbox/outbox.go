// Package outbox is a transactional outbox on PostgreSQL (New), or MySQL
// and MariaDB (NewMySQL): side effects that
// cannot roll back (an email, an event, a call to a payment gateway) are
// enqueued as HTTP requests, or as broker messages, in the same
// transaction as the state change that causes them, and a relay delivers
// them afterwards with the message's stable ID as the destination's
// deduplication key: through a retryhttp.Transport with it as
// Idempotency-Key, or through a [Sender] of another scheme (NATS
// JetStream with it as Nats-Msg-Id, RabbitMQ with it as message-id: the
// modules outbox/natsoutbox and outbox/rabbitoutbox).
//
// Together with the idempotency middleware's transactional mode, the
// handler's writes, its stored response and its outgoing messages commit or
// roll back as one: a crash before the commit leaves none of them; after
// it, the relay delivers every message at least once, and the receiver's
// idempotency layer turns "at least once" into "once".
//
//	tx, err := pgstore.Tx(r.Context()) // or mysqlstore.Tx
//	... write the order through tx ...
//	_, err = box.Enqueue(r.Context(), tx, outbox.Message{URL: "https://mail.example/send", Body: receipt})
//
// and, in the service (or a worker):
//
//	relay, err := outbox.NewRelay(outbox.RelayOptions{Outbox: box})
//	go relay.Run(ctx) // until ctx is done
//
// Several relays, in one process or many, share the work safely: a batch
// is leased with FOR UPDATE SKIP LOCKED, and a message whose relay died
// mid-delivery is delivered again, with the same key, when its lease
// expires. A relay wakes on LISTEN/NOTIFY when a message is committed and
// polls as a fallback; on MySQL, which has no notifications, it polls
// (see NewMySQL). Nothing starts on import.
package outbox

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retryhttp/retryhttp/pgschema"
)

// Message is an HTTP request to deliver, or a message for a Sender.
type Message struct {
	// Method is the request method; "" means POST.
	Method string
	// URL is where to send it, absolute: an http or https URL, or one of
	// a scheme a relay has a Sender for (natsoutbox.URL, rabbitoutbox.URL).
	URL string
	// Header is sent as given, with its names in canonical form, and always
	// with an Idempotency-Key, whatever the Sender: the message's own; the
	// value of its X-Idempotency-Key when it has only that (which is sent
	// too); otherwise the message's ID. That key is what the destination
	// and the consumers of queue/kafka and queue/sqs deduplicate by, so a
	// message without a key of its own is still run once.
	Header http.Header
	// Body is the request body.
	Body []byte
}

// Querier is what Enqueue writes through: the transaction of the state
// change, or a pool or connection for a message on its own. For an Outbox
// on PostgreSQL (New) it is anything with pgx's Exec: a pgx.Tx (pgstore.Tx
// in the middleware's transactional mode), a *pgxpool.Pool, a *pgx.Conn.
// For one on MySQL or MariaDB (NewMySQL) it is anything with
// database/sql's ExecContext: a *sql.Tx (mysqlstore.Tx), a *sql.DB, a
// *sql.Conn. Enqueue returns an error for another.
type Querier any

// Outbox is a table of messages. It is safe for concurrent use.
type Outbox struct {
	db    database
	table string // as given, validated
}

// DefaultTable is the table New uses when given "".
const DefaultTable = "retryhttp_outbox"

func quote(name string) string { return pgschema.Quote(name) }

// migrations are the outbox table's schema, numbered steps up and down
// (see package pgschema).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = pgschema.MustLoad(migrationFiles, "migrations") // checked by TestMigrations

// New returns an Outbox on table ("" means DefaultTable; "schema.table" is
// accepted). It does not create the table: see Migrate.
func New(pool *pgxpool.Pool, table string) (*Outbox, error) {
	if pool == nil {
		return nil, errors.New("outbox: nil pool")
	}
	if table == "" {
		table = DefaultTable
	}
	if !pgschema.ValidName(table) {
		return nil, fmt.Errorf("outbox: invalid table name %q", table)
	}
	return &Outbox{db: newPostgres(pool, table), table: table}, nil
}

// SchemaFor returns the statements that create an outbox table and the
// index of pending ones by due time that relays read: every migration's up
// step, for those who apply schemas with their own tool.
func SchemaFor(table string) string { return pgschema.UpSQL(migrations, table) }

// Migrate brings the table to the latest version of its schema (numbered
// steps, see packages pgschema and mysqlschema); safe to run from every
// replica at once.
func (o *Outbox) Migrate(ctx context.Context) error {
	if err := o.db.migrate(ctx, 0, false); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// MigrateDown reverts the table's schema to version to (0: drops it), for
// a rollback of this module.
func (o *Outbox) MigrateDown(ctx context.Context, to int) error {
	if err := o.db.migrate(ctx, to, true); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Enqueue adds m to the outbox through db and returns its ID, which is also
// the Idempotency-Key it is delivered with when m carries no key of its own
// (see Message.Header). Written through the state
// change's transaction, the message exists if and only if the transaction
// commits; relays are woken when it does.
func (o *Outbox) Enqueue(ctx context.Context, db Querier, m Message) (string, error) {
	if m.Method == "" {
		m.Method = http.MethodPost
	}
	if err := deliverable(m.URL); err != nil {
		return "", fmt.Errorf("outbox: Enqueue: %w", err)
	}
	header := []byte("{}")
	if len(m.Header) > 0 {
		var err error
		if header, err = json.Marshal(m.Header); err != nil {
			return "", fmt.Errorf("outbox: Enqueue: %w", err)
		}
	}
	id := uuid.NewString()
	if err := o.db.insert(ctx, db, id, m, header); err != nil {
		return "", fmt.Errorf("outbox: Enqueue: %w", err)
	}
	return id, nil
}

// deliverable reports a URL that no relay could ever deliver: one that
// does not parse, has no scheme, or names no destination (an http URL
// without a host, "nats:" without a subject). Which schemes a relay sends
// is the relay's (RelayOptions.Senders): one it has no Sender for is dead
// at its first delivery.
func deliverable(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("URL %q does not parse: %w", raw, err)
	case !u.IsAbs():
		return fmt.Errorf("URL %q is not absolute: it names no scheme", raw)
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host == "":
		return fmt.Errorf("URL %q names no host", raw)
	case u.Opaque == "" && u.Host == "" && strings.Trim(u.Path, "/") == "":
		return fmt.Errorf("URL %q names no destination after its scheme", raw)
	}
	return nil
}

// Table is the outbox's table, as given to New.
func (o *Outbox) Table() string { return o.table }

// Status is a message's state.
type Status string

const (
	Pending   Status = "pending"   // waiting to be delivered, or to be tried again
	Delivered Status = "delivered" // the receiver answered 2xx (stored in LastStatus)
	Dead      Status = "dead"      // given up: MaxDeliveries deliveries failed, or the receiver refused it for good
)

// State is what the outbox knows of a message.
type State struct {
	Status     Status
	Deliveries int
	LastStatus int
	LastError  string
}

// ErrNotFound is State's error for an ID the outbox does not hold.
var ErrNotFound = errors.New("outbox: no such message")

// State returns the state of message id, or an error wrapping
// ErrNotFound.
func (o *Outbox) State(ctx context.Context, id string) (State, error) {
	st, err := o.db.state(ctx, id)
	if err != nil {
		return st, fmt.Errorf("outbox: State(%q): %w", id, err)
	}
	return st, nil
}
