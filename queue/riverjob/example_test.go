package riverjob_test

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/pgstore"
	"github.com/retryhttp/retryhttp/queue/riverjob"
)

// The job's calls go through a Transport that injects keys; the River
// client runs every job under the middleware.
func Example() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://localhost/app")
	provider := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true}}

	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[ShipArgs]) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://shipping.example/v1/shipments", nil)
		resp, err := provider.Do(req) // the same Idempotency-Key on every attempt of this job
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}))
	client, _ := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Middleware: []rivertype.Middleware{&riverjob.Middleware{}},
		Queues:     map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:    workers,
	})
	client.Start(ctx)
}

// River's transactional insert instead of the outbox: behind the
// idempotency middleware in transactional mode, the handler enqueues the
// job in the transaction that stores its response, so a retried request
// replays the response and enqueues nothing, and a handler that fails
// leaves no job.
//
// Pick River when the follow-up work is a job your workers run (it
// retries, schedules and dead-letters it, on the same PostgreSQL); pick
// the outbox when the effect is one HTTP request or broker message to
// deliver, where the relay needs no worker code.
func Example_transactionalInsert() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://localhost/app")
	jobs, _ := river.NewClient[pgx.Tx](riverpgxv5.New(pool), &river.Config{}) // an insert-only client
	store, _ := pgstore.New(pool, "")
	mw, _ := idempotency.New(idempotency.Options{Store: store, Transactional: true})

	http.Handle("POST /orders", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := pgstore.Tx(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// ... write the order through tx ...
		if _, err := jobs.InsertTx(r.Context(), tx, ShipArgs{Order: "order-7"}, nil); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // rolled back: no order, no job
			return
		}
		w.WriteHeader(http.StatusCreated) // commits the order, the job and this response together
	})))
}
