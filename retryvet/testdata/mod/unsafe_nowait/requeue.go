package unsafe_nowait

import (
	"bytes"
	"fmt"
	"net/http"
)

type item struct {
	body  []byte
	tries int
}

type sender struct {
	c     *http.Client
	queue chan *item
	errs  chan error
}

// send puts a failed item back on the queue its worker reads: the worker
// sends it again, with no key.
func (s *sender) send(it *item) { // want send:`sends a POST \(send\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/events", bytes.NewReader(it.body))
	resp, err := s.c.Do(req) // want `POST sent again, put back on a channel when it fails, without an Idempotency-Key`
	if err != nil && it.tries < 3 {
		it.tries++
		s.queue <- it
		return
	}
	if err == nil {
		resp.Body.Close()
	}
}

func (s *sender) run() { // want run:`sends a POST \(send\)`
	for it := range s.queue {
		s.send(it)
	}
}

// report tells of a failure on a channel, and sends nothing again.
func (s *sender) report(it *item) { // want report:`sends a POST \(report\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/events", bytes.NewReader(it.body))
	resp, err := s.c.Do(req)
	if err != nil {
		s.errs <- fmt.Errorf("event of %d bytes: %w", len(it.body), err)
		return
	}
	resp.Body.Close()
}
