// Package app retries a POST in a hand-written loop, without a key, and
// sends one the protocol makes safe, marked so.
package app

import (
	"bytes"
	"net/http"
	"time"
)

func charge(c *http.Client, body []byte) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		var resp *http.Response
		if resp, err = c.Do(req); err == nil {
			return resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
	return err
}

func upload(c *http.Client, chunk []byte) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/uploads/1?offset=0", bytes.NewReader(chunk))
		var resp *http.Response
		//retryvet:ignore the upload API writes by offset: a repeated chunk is a no-op
		if resp, err = c.Do(req); err == nil {
			return resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
	return err
}
