// Package safe_vendor_keys retries POSTs that carry a key the server
// dedupes on, under a vendor's header or in the body.
package safe_vendor_keys

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
)

func paypal(c *http.Client, body []byte) {
	key := uuid.NewString()
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v2/checkout/orders", bytes.NewReader(body))
		req.Header.Set("PayPal-Request-Id", key)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

type payment struct {
	Amount int    `json:"amount"`
	Key    string `json:"idempotency_key"`
}

func square(c *http.Client, amount int) {
	b, _ := json.Marshal(payment{Amount: amount, Key: uuid.NewString()})
	for i := 0; i < 3; i++ {
		if resp, err := c.Post("https://api.example.com/v2/payments", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

type track struct {
	Event     string
	MessageID string `json:"messageId"`
}

func segment(c *http.Client, event string) {
	var t track
	t.Event = event
	t.MessageID = uuid.NewString()
	b, _ := json.Marshal(t)
	for i := 0; i < 3; i++ {
		if resp, err := c.Post("https://api.example.com/v1/track", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

func mapBody(c *http.Client, amount int) {
	b, _ := json.Marshal(map[string]any{"amount": amount, "idempotencyKey": uuid.NewString()})
	for i := 0; i < 3; i++ {
		if resp, err := c.Post("https://api.example.com/transfers", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}
