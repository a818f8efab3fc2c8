CREATE TABLE IF NOT EXISTS $TABLE (
	key         text PRIMARY KEY,
	fingerprint text NOT NULL,
	owner       text NOT NULL,
	done        boolean NOT NULL DEFAULT false,
	status      integer,
	header      jsonb,
	body        bytea,
	too_large   boolean NOT NULL DEFAULT false,
	expires_at  timestamptz NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS "$NAME_expires_at" ON $TABLE (expires_at);
