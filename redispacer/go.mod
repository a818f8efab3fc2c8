module github.com/retryhttp/retryhttp/redispacer

go 1.25.0

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/retryhttp/retryhttp v0.0.0-00010101000000-000000000000
	github.com/retryhttp/retryhttp/shared v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/retryhttp/retryhttp => ../

replace github.com/retryhttp/retryhttp/shared => ../shared
