module github.com/retryhttp/retryhttp/queue/riverjob

go 1.25.0

require (
	github.com/google/uuid v1.6.0
	github.com/jackc/pgx/v5 v5.13.0
	github.com/retryhttp/retryhttp v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/pgstore v0.0.0-00010101000000-000000000000
	github.com/riverqueue/river v0.44.1
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.44.1
	github.com/riverqueue/river/rivertype v0.44.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/retryhttp/retryhttp/pgschema v0.0.0-00010101000000-000000000000 // indirect
	github.com/retryhttp/retryhttp/shared v0.0.0-00010101000000-000000000000
	github.com/riverqueue/river/riverdriver v0.44.1 // indirect
	github.com/riverqueue/river/rivershared v0.44.1 // indirect
	github.com/tidwall/gjson v1.19.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace (
	github.com/retryhttp/retryhttp => ../../
	github.com/retryhttp/retryhttp/idempotency/pgstore => ../../idempotency/pgstore
	github.com/retryhttp/retryhttp/pgschema => ../../pgschema
)

replace github.com/retryhttp/retryhttp/shared => ../../shared
