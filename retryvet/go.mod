module github.com/retryhttp/retryhttp/retryvet

go 1.25.0

require (
	github.com/golangci/plugin-module-register v0.1.2
	golang.org/x/tools v0.45.0
)

require (
	golang.org/x/mod v0.36.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
)
