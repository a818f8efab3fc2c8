module github.com/retryhttp/retryhttp/mysqlschema

go 1.25.0

require github.com/retryhttp/retryhttp/shared v0.0.0-00010101000000-000000000000

replace github.com/retryhttp/retryhttp/shared => ../shared
