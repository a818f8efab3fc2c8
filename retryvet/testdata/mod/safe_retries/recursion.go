package safe_retries

import (
	"bytes"
	"net/http"
	"time"
)

// keyedAgain retries by recursion with one key, made by its caller.
func keyedAgain(c *http.Client, body []byte, key string, attempt int) error {
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		return nil
	}
	if attempt >= 3 {
		return err
	}
	time.Sleep(time.Second)
	return keyedAgain(c, body, key, attempt+1)
}

type node struct{ children []*node }

// count recurses and waits for nothing, and sends nothing: no retry.
func count(n *node) int {
	total := 1
	for _, ch := range n.children {
		total += count(ch)
	}
	return total
}

// getAgain retries a GET by recursion: safe to repeat.
func getAgain(c *http.Client, attempt int) error {
	resp, err := c.Get("https://api.example.com/health")
	if err == nil {
		resp.Body.Close()
		return nil
	}
	if attempt >= 3 {
		return err
	}
	time.Sleep(time.Second)
	return getAgain(c, attempt+1)
}
