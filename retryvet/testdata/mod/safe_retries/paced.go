package safe_retries

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// publish sends each event once, paced: another POST on each pass, not
// the same one again.
func publish(c *http.Client, events [][]byte) {
	for _, e := range events {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/events", bytes.NewReader(e))
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type order struct{ ID string }

// submit encodes each order in the loop, then posts it.
func submit(c *http.Client, orders []order) {
	for i := 0; i < len(orders); i++ {
		b, _ := json.Marshal(orders[i])
		if resp, err := c.Post("https://api.example.com/orders", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
		}
		time.Sleep(time.Second / 10)
	}
}
