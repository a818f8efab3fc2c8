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

// follow follows a redirect by recursion: another URL, and the wait it
// reaches is its sender's, not one between attempts.
func follow(c *http.Client, url string, left int) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	resp, err := sendPaced(c, req)
	if err == nil && resp.StatusCode == http.StatusTemporaryRedirect && left > 0 {
		resp.Body.Close()
		return follow(c, resp.Header.Get("Location"), left-1)
	}
	return resp, err
}

// sendPaced keeps to a rate, then sends.
func sendPaced(c *http.Client, req *http.Request) (*http.Response, error) { // want sendPaced:"sends its parameter 1 through its client 0"
	time.Sleep(10 * time.Millisecond)
	return c.Do(req)
}
