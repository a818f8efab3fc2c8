package main

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// counter counts what a client sends its store: round trips, and the
// commands (or statements) in them. A pipeline is one trip of several
// commands; a script that runs EVALSHA and, when the server lacks it,
// EVAL, is two trips. Counted in the client, so a regression in round
// trips shows in the table.
type counter struct {
	trips, commands atomic.Int64
}

func (c *counter) sent() (trips, commands int64) {
	if c == nil {
		return 0, 0
	}
	return c.trips.Load(), c.commands.Load()
}

// redisCounter is a go-redis hook counting each command and pipeline.
type redisCounter struct{ *counter }

func (redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

var _ redis.Hook = redisCounter{}

// pgCounter is a pgx tracer counting each statement (with the
// extended protocol and a cached statement, one round trip) and each
// batch (one round trip of several statements).
type pgCounter struct{ *counter }

func (h pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	h.trips.Add(1)
	h.commands.Add(1)
	return ctx
}

func (pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (h pgCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	h.trips.Add(1)
	return ctx
}

func (h pgCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	h.commands.Add(1)
}

func (pgCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

var (
	_ pgx.QueryTracer = pgCounter{}
	_ pgx.BatchTracer = pgCounter{}
)
