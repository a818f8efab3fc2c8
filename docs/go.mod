module github.com/retryhttp/retryhttp/docs

go 1.26

replace (
	github.com/retryhttp/retryhttp => ../
	github.com/retryhttp/retryhttp/idempotency/pgstore => ../idempotency/pgstore
	github.com/retryhttp/retryhttp/idempotency/redisstore => ../idempotency/redisstore
	github.com/retryhttp/retryhttp/outbox => ../outbox
	github.com/retryhttp/retryhttp/outbox/kafkaoutbox => ../outbox/kafkaoutbox
	github.com/retryhttp/retryhttp/outbox/natsoutbox => ../outbox/natsoutbox
	github.com/retryhttp/retryhttp/outbox/rabbitoutbox => ../outbox/rabbitoutbox
	github.com/retryhttp/retryhttp/outbox/sqsoutbox => ../outbox/sqsoutbox
	github.com/retryhttp/retryhttp/pgschema => ../pgschema
	github.com/retryhttp/retryhttp/queue/kafka => ../queue/kafka
	github.com/retryhttp/retryhttp/queue/natsjs => ../queue/natsjs
	github.com/retryhttp/retryhttp/queue/rabbitmq => ../queue/rabbitmq
	github.com/retryhttp/retryhttp/queue/riverjob => ../queue/riverjob
	github.com/retryhttp/retryhttp/queue/sqs => ../queue/sqs
	github.com/retryhttp/retryhttp/redispacer => ../redispacer
)

require (
	github.com/aws/aws-lambda-go v1.55.1
	github.com/aws/aws-sdk-go-v2/config v1.33.19
	github.com/aws/aws-sdk-go-v2/service/dynamodb v1.74.1
	github.com/aws/aws-sdk-go-v2/service/sqs v1.53.0
	github.com/awslabs/aws-lambda-go-api-proxy v0.16.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jackc/pgx/v5 v5.13.0
	github.com/nats-io/nats.go v1.52.0
	github.com/prometheus/client_golang v1.24.0
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/retryhttp/retryhttp v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/dynamostore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/pgstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/idempotency/redisstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox/kafkaoutbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox/natsoutbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox/rabbitoutbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/outbox/sqsoutbox v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/kafka v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/natsjs v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/rabbitmq v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/riverjob v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/queue/sqs v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/redispacer v0.0.0-00010101000000-000000000000
	github.com/riverqueue/river v0.44.1
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.44.1
	github.com/riverqueue/river/rivertype v0.44.1
	github.com/stripe/stripe-go/v82 v82.5.1
	github.com/twmb/franz-go v1.21.7
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/aws/aws-sdk-go-v2 v1.48.0 // indirect
	github.com/aws/aws-sdk-go-v2/credentials v1.21.1 // indirect
	github.com/aws/aws-sdk-go-v2/feature/ec2/imds v1.20.9 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/v4a v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.25 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery v1.13.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/presigned-url v1.14.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/signin v1.13.1 // indirect
	github.com/aws/aws-sdk-go-v2/service/sso v1.39.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/ssooidc v1.44.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/sts v1.52.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.26 // indirect
	github.com/retryhttp/retryhttp/mysqlschema v0.0.0-00010101000000-000000000000 // indirect
	github.com/retryhttp/retryhttp/shared v0.0.0-00010101000000-000000000000 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.13.1 // indirect
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/nkeys v0.4.15 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/retryhttp/retryhttp/idempotency/mysqlstore v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/pgschema v0.0.0-00010101000000-000000000000 // indirect
	github.com/riverqueue/river/riverdriver v0.44.1 // indirect
	github.com/riverqueue/river/rivershared v0.44.1 // indirect
	github.com/tidwall/gjson v1.19.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.51.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	gonum.org/v1/gonum v0.16.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/retryhttp/retryhttp/idempotency/mysqlstore => ../idempotency/mysqlstore

replace github.com/retryhttp/retryhttp/mysqlschema => ../mysqlschema

replace github.com/retryhttp/retryhttp/shared => ../shared

replace github.com/retryhttp/retryhttp/idempotency/dynamostore => ../idempotency/dynamostore
