// Package riverjob makes HTTP calls in River jobs safe to retry: a River
// worker middleware that gives each job's context its operation, so that
// the calls a job makes through a retryhttp.Transport with
// InjectIdempotencyKey derive the same Idempotency-Keys on every attempt
// River makes, and that leaves retrying to River after the first attempt.
//
//	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
//		Middleware: []rivertype.Middleware{&riverjob.Middleware{}},
//		Workers:    workers,
//	})
//
// The operation is the job's ID by default: River retries a job as the
// same row, so every attempt derives the same keys, and a receiver behind
// the idempotency middleware (or any API that honours Idempotency-Key)
// runs each call once. A job enqueued twice for one business event has two
// IDs; key it by the event instead (Middleware.Key).
//
// One retry layer. River retries a failed job (with its backoff, up to
// its MaxAttempts); a Transport under it retries each call too. On a
// job's first attempt the Transport retries as its Policy says; on every
// later attempt the middleware sends each call once (retryhttp's
// WithoutRetries), since River's retry is then the one that counts: S
// River attempts over R Transport attempts make at most R + S − 1 sends
// of a call with a body, not R × S, net/http's own resend of a lost answer
// included (the Transport withholds it past MaxAttempts).
//
// River's transactional insert (Client.InsertTx in the transaction of the
// state change, the idempotency middleware's pgstore.Tx in transactional
// mode) is the alternative to the outbox for work that River runs: the job
// exists if and only if the transaction commits. See the package example.
package riverjob

import (
	"context"
	"errors"
	"strconv"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/queue"
)

// Middleware is the River worker middleware. Put it in river.Config's
// Middleware (or WorkerMiddleware); its zero value keys each job by its
// ID.
type Middleware struct {
	river.MiddlewareDefaults
	// Key returns the operation a job's HTTP calls derive their keys
	// from. nil means "river-job-" and the job's ID. A key must be the
	// same on every attempt of the job and unique to its work: use a
	// business identity (the order ID in the args) when one event may be
	// enqueued as two jobs.
	Key func(job *rivertype.JobRow) (string, error)
}

func jobID(job *rivertype.JobRow) (string, error) {
	return "river-job-" + strconv.FormatInt(job.ID, 10), nil
}

// ErrNoKey wraps the error of a Key that gave no key. The job does not
// run, since its calls could not be deduplicated, and is cancelled
// (river.JobCancel) rather than failed: no retry would give it a key.
var ErrNoKey = errors.New("riverjob: no operation key for the job")

// Work implements rivertype.WorkerMiddleware: it runs the job with its
// operation in the context, and with the Transport's retries off after
// the first attempt. A job whose worker returns queue.Permanent(err) is
// cancelled (river.JobCancel), as the other consumers end a message that
// no redelivery can fix; River itself recovers a worker's panic as a
// failed attempt.
func (m *Middleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	keyOf := m.Key
	if keyOf == nil {
		keyOf = jobID
	}
	key, err := keyOf(job)
	if err == nil && key == "" {
		err = errors.New("empty key")
	}
	if err != nil {
		return river.JobCancel(errors.Join(ErrNoKey, err))
	}
	ctx = retryhttp.WithOperationKey(ctx, key)
	if job.Attempt > 1 {
		ctx = retryhttp.WithoutRetries(ctx)
	}
	err = doInner(ctx)
	if queue.IsPermanent(err) {
		return river.JobCancel(err)
	}
	return err
}

var _ rivertype.WorkerMiddleware = (*Middleware)(nil)
