CREATE TABLE IF NOT EXISTS $TABLE (
	idem_key    VARBINARY(255) NOT NULL,
	fingerprint VARBINARY(255) NOT NULL,
	owner       VARBINARY(64) NOT NULL,
	done        BOOLEAN NOT NULL DEFAULT FALSE,
	status      INT NULL,
	header      MEDIUMBLOB NULL,
	body        LONGBLOB NULL,
	too_large   BOOLEAN NOT NULL DEFAULT FALSE,
	expires_at  DATETIME(6) NOT NULL,
	created_at  DATETIME(6) NOT NULL,
	PRIMARY KEY (idem_key),
	INDEX `$NAME_expires_at` (expires_at)
) ENGINE=InnoDB;
