package unsafe_helpers

import (
	"bytes"
	"net/http"

	backoff4 "github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
)

type charger struct {
	c    *http.Client
	body []byte
}

// charge is handed to backoff by name, not in a literal.
func (ch *charger) charge() error {
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(ch.body))
	resp, err := ch.c.Do(req) // want `POST retried by backoff.Retry without an Idempotency-Key`
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func chargeByName(ch *charger) error {
	return backoff4.Retry(ch.charge, backoff4.NewExponentialBackOff())
}

// refund makes its key inside the operation: a new one on every attempt.
func (ch *charger) refund() error {
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/refunds", bytes.NewReader(ch.body))
	req.Header.Set("Idempotency-Key", uuid.NewString()) // want `the Idempotency-Key is made anew on every attempt backoff.Retry makes`
	resp, err := ch.c.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func refundByName(ch *charger) error {
	return backoff4.Retry(ch.refund, backoff4.NewExponentialBackOff())
}
