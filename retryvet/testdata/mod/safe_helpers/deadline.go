package safe_helpers

import (
	"bytes"
	"net/http"
	"time"
)

// drain sends each batch once, until a deadline: time.Time's After
// method compares two times and waits for nothing, unlike time.After.
func drain(c *http.Client, batches [][]byte, deadline time.Time) {
	for _, b := range batches {
		if time.Now().After(deadline) {
			return
		}
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/batches", bytes.NewReader(b))
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}
