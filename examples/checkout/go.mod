module github.com/retryhttp/retryhttp/examples/checkout

go 1.25.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/nats-io/nats.go v1.52.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/retryhttp/retryhttp v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/pgstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/redisstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox/kafkaoutbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox/natsoutbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/kafka v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/natsjs v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/shared v0.0.0-00010101000000-000000000000
	github.com/twmb/franz-go v1.21.7
	github.com/twmb/franz-go/pkg/kadm v1.18.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/nkeys v0.4.15 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.26 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/retryhttp/retryhttp/mysqlschema v0.0.0-00010101000000-000000000000 // indirect
	github.com/retryhttp/retryhttp/pgschema v0.0.0-00010101000000-000000000000 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260515175617-8268a5d078c0 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.13.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.51.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace (
	github.com/retryhttp/retryhttp => ../..
	github.com/retryhttp/retryhttp/idempotency/pgstore => ../../idempotency/pgstore
	github.com/retryhttp/retryhttp/idempotency/redisstore => ../../idempotency/redisstore
	github.com/retryhttp/retryhttp/outbox => ../../outbox
	github.com/retryhttp/retryhttp/outbox/kafkaoutbox => ../../outbox/kafkaoutbox
	github.com/retryhttp/retryhttp/outbox/natsoutbox => ../../outbox/natsoutbox
	github.com/retryhttp/retryhttp/queue/kafka => ../../queue/kafka
	github.com/retryhttp/retryhttp/queue/natsjs => ../../queue/natsjs
)

replace github.com/retryhttp/retryhttp/pgschema => ../../pgschema

replace github.com/retryhttp/retryhttp/mysqlschema => ../../mysqlschema

replace github.com/retryhttp/retryhttp/shared => ../../shared

tool github.com/retryhttp/retryhttp/shared/kafkatest/kfake
