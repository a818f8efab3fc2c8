// Package safe_nowait has loops that send a POST again and again and are
// no retries: nothing in them goes round again because a send failed and
// leaves because it succeeded.
package safe_nowait

import (
	"bytes"
	"log"
	"net/http"
	"slices"
	"time"
)

type job struct{ req *http.Request }

// consume skips a job whose send fails: the next pass sends the next job.
func consume(c *http.Client, jobs <-chan job) {
	for {
		j := <-jobs
		resp, err := c.Do(j.req)
		if err != nil {
			continue
		}
		resp.Body.Close()
	}
}

// heartbeat sends the same POST on every tick and stops at the first
// failure: it goes round again after a success, not after a failure.
func heartbeat(c *http.Client, body []byte, tick <-chan time.Time) error { // want heartbeat:`sends a POST \(heartbeat\)`
	for range tick {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/heartbeat", bytes.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	return nil
}

// flusher waits and sends what it has gathered on each pass, through a
// function that POSTs: it logs a failure and goes on whatever happened.
type flusher struct {
	c       *http.Client
	pending [][]byte
}

func (f *flusher) flush() error { // want flush:`sends a POST \(flush\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/batch", bytes.NewReader(bytes.Join(f.pending, nil)))
	resp, err := f.c.Do(req)
	if err != nil {
		return err
	}
	f.pending = nil
	return resp.Body.Close()
}

func (f *flusher) run(stop <-chan struct{}) { // want run:`sends a POST \(flush\)`
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		if err := f.flush(); err != nil {
			log.Print(err)
		}
	}
}

// overValues ranges over an iterator that does not wait, and leaves at
// the first answer whatever it is.
func overValues(c *http.Client, bodies [][]byte) { // want overValues:`sends a POST \(overValues\)`
	for b := range slices.Values(bodies) {
		resp, err := c.Post("https://api.example.com/items", "application/json", bytes.NewReader(b))
		if err != nil {
			return
		}
		resp.Body.Close()
	}
}

// follow sends the request again at the Location a 301 names, whatever
// its method (a 3xx, not only a 301): another request, made of the
// answer, not a retry.
func follow(c *http.Client, req *http.Request, left int) (*http.Response, error) { // want follow:`sends its parameter 1 through its client 0`
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= http.StatusMultipleChoices && left > 0 {
		loc, err := resp.Location()
		if err != nil {
			return resp, nil
		}
		resp.Body.Close()
		next := req.Clone(req.Context())
		next.URL = loc
		return follow(c, next, left-1)
	}
	return resp, nil
}
