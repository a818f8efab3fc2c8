package outbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp"
)

// httpSender delivers http and https messages with the relay's Client,
// their header as the Delivery has it (an Idempotency-Key included).
type httpSender struct{ client *http.Client }

func (s httpSender) Send(ctx context.Context, d Delivery) Result {
	req, err := http.NewRequestWithContext(ctx, d.Method, d.URL.String(), bytes.NewReader(d.Body))
	if err != nil {
		return Result{Err: err, Final: true} // the request cannot be sent: no delivery will do
	}
	for k, v := range d.Header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return Result{Status: code}
	case retryable(code):
		r := Result{Status: code, Err: fmt.Errorf("the receiver answered %d", code)}
		if w, ok := retryhttp.ServerWait(resp, time.Now(), nil); ok {
			r.Wait = w
		}
		return r
	default: // a refusal for good (400, 404, 422, ...), or a redirect not followed
		return Result{Status: code, Err: fmt.Errorf("the receiver answered %d", code), Final: true}
	}
}

// transportStatuses are the statuses a retryhttp.Transport retries by
// default: the one list a receiver's "try again" is read from.
var transportStatuses = retryhttp.DefaultRetryStatuses()

// retryable reports whether a receiver's status asks for the delivery
// again later. The relay retries what the Transport retries by default
// (every message carries a key, so 409 counts), and also 425 and every
// other 5xx, 500 included: a Transport returns a 500 to a caller who is
// waiting, while a relay has minutes of backoff and a dead letter after
// MaxDeliveries, so a receiver's passing bug is worth a later delivery. A
// status below 200 (a 1xx as final answer) is not an answer either.
func retryable(code int) bool {
	return slices.Contains(transportStatuses, code) || code == http.StatusTooEarly || code >= 500 || code < 200
}
