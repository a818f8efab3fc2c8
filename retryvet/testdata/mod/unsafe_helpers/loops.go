// Package unsafe_helpers retries POSTs and PATCHes through function
// values, RoundTrippers, resty calls in hand loops, and retry helpers given
// a closure, with no Idempotency-Key.
package unsafe_helpers

import (
	"bytes"
	"net/http"
	"time"

	resty2 "github.com/go-resty/resty/v2"
	resty3 "resty.dev/v3"
)

type sender struct {
	do func(*http.Request) (*http.Response, error)
}

func (s *sender) charge(body []byte) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		var resp *http.Response
		if resp, err = s.do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

func roundTrip(rt http.RoundTripper, body []byte) {
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("PATCH", "https://api.example.com/orders/1", bytes.NewReader(body))
		if _, err := rt.RoundTrip(req); err == nil { // want `PATCH retried by this loop without an Idempotency-Key`
			return
		}
		time.Sleep(time.Second)
	}
}

func restyDelays(c *resty2.Client, order any) error {
	var err error
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if _, err = c.R().SetBody(order).Post("https://api.example.com/orders"); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			return nil
		}
		time.Sleep(d)
	}
	return err
}

func restyV3Execute(c *resty3.Client) {
	for i := 0; i < 3; i++ {
		if _, err := c.R().Execute(http.MethodPatch, "https://api.example.com/orders/1"); err == nil { // want `PATCH retried by this loop without an Idempotency-Key`
			return
		}
		time.Sleep(time.Second)
	}
}
