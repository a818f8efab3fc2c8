package unsafe_retries

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	resty3 "resty.dev/v3"
)

func retryablePOST(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil) // want `POST retried by go-retryablehttp without an Idempotency-Key`
	c.Do(req)
}

func retryablePATCH(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest(http.MethodPatch, "https://api.example.com/orders/1", nil) // want `PATCH retried by go-retryablehttp without an Idempotency-Key`
	c.Do(req)
}

// resty v3 retries POST and PATCH only when asked to.
func restyV3NonIdempotent() {
	resty3.New().SetRetryCount(3).SetRetryAllowNonIdempotent(true) // want `resty retries POST and PATCH here`
}

func failsafePOST(c *http.Client) {
	req, _ := http.NewRequest("POST", "https://api.example.com/charges", strings.NewReader("{}"))
	failsafehttp.NewRequest(req, c).Do() // want `POST retried by failsafehttp without an Idempotency-Key`
}

func handLoop(c *http.Client, body []byte) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest("POST", "https://api.example.com/charges", bytes.NewReader(body))
		var resp *http.Response
		if resp, err = c.Do(req); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			resp.Body.Close()
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

func handLoopPost(body []byte) {
	for i := 0; i < 3; i++ {
		if _, err := http.Post("https://api.example.com/charges", "application/json", bytes.NewReader(body)); err == nil { // want `POST retried by this loop without an Idempotency-Key`
			return
		}
		time.Sleep(time.Second)
	}
}

func keyPerAttempt(c *http.Client, body []byte) {
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", "https://api.example.com/charges", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", uuid.NewString()) // want `the Idempotency-Key is made anew on every attempt`
		if _, err := c.Do(req); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
}

func keyVarPerAttempt(c *http.Client, body []byte) {
	for i := 0; i < 3; i++ {
		key := uuid.NewString()
		req, _ := http.NewRequest("POST", "https://api.example.com/charges", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", key) // want `the Idempotency-Key is made anew on every attempt`
		if _, err := c.Do(req); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
}

func forever(c *http.Client) {
	for { // want `a retry loop with no attempt bound and no context`
		resp, err := c.Get("https://api.example.com/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(time.Second)
	}
}

func retryableClientPost(body []byte) {
	c := retryablehttp.NewClient()
	c.RetryMax = 4
	c.Post("https://api.example.com/login", "application/json", bytes.NewReader(body)) // want `POST retried by go-retryablehttp's Client.Post`
}

func ignoredWithoutReason(c *retryablehttp.Client) {
	//retryvet:ignore // want `//retryvet:ignore needs a reason`
	req, _ := retryablehttp.NewRequest("POST", "https://api.example.com/charges", nil) // want `POST retried by go-retryablehttp without an Idempotency-Key`
	c.Do(req)
}

func healthy(err error) bool { return err == nil }

// The call that gates the loop's exit is given no counter: nothing bounds
// the attempts.
func foreverHelper(c *http.Client) {
	for { // want `a retry loop with no attempt bound and no context`
		_, err := c.Get("https://api.example.com/health")
		if healthy(err) {
			return
		}
		time.Sleep(time.Second)
	}
}
