CREATE TABLE IF NOT EXISTS $TABLE (
	id           text PRIMARY KEY,
	method       text NOT NULL,
	url          text NOT NULL,
	header       jsonb NOT NULL DEFAULT '{}',
	body         bytea,
	status       text NOT NULL DEFAULT 'pending',
	deliveries   integer NOT NULL DEFAULT 0,
	next_at      timestamptz NOT NULL DEFAULT now(),
	created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
	delivered_at timestamptz,
	last_status  integer,
	last_error   text
);
CREATE INDEX IF NOT EXISTS "$NAME_pending" ON $TABLE (next_at) WHERE status = 'pending';
