module github.com/retryhttp/retryhttp/bench

go 1.25.0

replace github.com/retryhttp/retryhttp => ../

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.21.1
	github.com/aws/aws-sdk-go-v2/service/dynamodb v1.74.1
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-sql-driver/mysql v1.10.1
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jackc/pgx/v5 v5.13.0
	github.com/prometheus/client_golang v1.24.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/retryhttp/retryhttp v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/dynamostore v0.0.0-00010101000000-000000000000
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.25 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery v1.13.12 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/retryhttp/retryhttp/mysqlschema v0.0.0-00010101000000-000000000000 // indirect
	github.com/retryhttp/retryhttp/pgschema v0.0.0-00010101000000-000000000000 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/retryhttp/retryhttp/idempotency/mysqlstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/pgstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/redisstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/shared v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/retryhttp/retryhttp/idempotency/pgstore => ../idempotency/pgstore

replace github.com/retryhttp/retryhttp/idempotency/redisstore => ../idempotency/redisstore

replace github.com/retryhttp/retryhttp/pgschema => ../pgschema

replace github.com/retryhttp/retryhttp/shared => ../shared

replace github.com/retryhttp/retryhttp/idempotency/mysqlstore => ../idempotency/mysqlstore

replace github.com/retryhttp/retryhttp/mysqlschema => ../mysqlschema

replace github.com/retryhttp/retryhttp/idempotency/dynamostore => ../idempotency/dynamostore
