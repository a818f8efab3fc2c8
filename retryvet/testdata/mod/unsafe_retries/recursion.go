package unsafe_retries

import (
	"bytes"
	"net/http"
	"time"
)

// chargeAgain retries by calling itself, not by a loop.
func chargeAgain(c *http.Client, body []byte, attempt int) error {
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
	resp, err := c.Do(req) // want `POST retried by this recursion without an Idempotency-Key`
	if err == nil {
		resp.Body.Close()
		return nil
	}
	if attempt >= 3 {
		return err
	}
	time.Sleep(time.Duration(attempt) * time.Second)
	return chargeAgain(c, body, attempt+1)
}

type api struct{ c *http.Client }

func (a *api) patch(body []byte, left int) error {
	req, _ := http.NewRequest(http.MethodPatch, "https://api.example.com/orders/1", bytes.NewReader(body))
	resp, err := a.c.Do(req) // want `PATCH retried by this recursion without an Idempotency-Key`
	if err != nil && left > 0 {
		<-time.After(time.Second)
		return a.patch(body, left-1)
	}
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// pages retries each page in a loop and recurses for the next: one
// finding at the send, not one from each.
func pages(c *http.Client, body []byte, page int) error {
	if page > 3 {
		return nil
	}
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/search", bytes.NewReader(body))
		if resp, err := c.Do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			break
		}
		time.Sleep(time.Second)
	}
	return pages(c, body, page+1)
}
