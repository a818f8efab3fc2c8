CREATE TABLE IF NOT EXISTS $TABLE (
	id           VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	method       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	url          TEXT NOT NULL,
	header       MEDIUMBLOB NOT NULL,
	body         LONGBLOB NULL,
	status       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
	deliveries   INT NOT NULL DEFAULT 0,
	next_at      DATETIME(6) NOT NULL,
	created_at   DATETIME(6) NOT NULL,
	delivered_at DATETIME(6) NULL,
	last_status  INT NULL,
	last_error   TEXT NULL,
	PRIMARY KEY (id),
	INDEX `$NAME_pending` (status, next_at)
) ENGINE=InnoDB;
