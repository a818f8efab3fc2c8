// Package unsafe_standard_client hands out go-retryablehttp's retrying
// client as a plain *http.Client (StandardClient, retries on by default)
// and sends POSTs through it, and wraps a POST with FromRequest.
package unsafe_standard_client

import (
	"net/http"
	"strings"

	"github.com/hashicorp/go-retryablehttp"
)

type api struct{ http *http.Client }

func newAPI() *api { return &api{http: retryablehttp.NewClient().StandardClient()} }

func (a *api) charge(body string) { // want charge:`sends a POST \(charge\)`
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/charges", strings.NewReader(body))
	a.http.Do(req) // want `POST retried by go-retryablehttp through StandardClient\(\)`
}

func (a *api) list() {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/charges", nil)
	a.http.Do(req)
}

func local(body string) { // want local:`sends a PATCH \(local\)`
	c := retryablehttp.NewClient().StandardClient()
	req, _ := http.NewRequest("PATCH", "https://api.example.com/orders/1", strings.NewReader(body))
	c.Do(req) // want `PATCH retried by go-retryablehttp through StandardClient\(\)`
}

func wrapped(c *retryablehttp.Client, body string) {
	req, _ := http.NewRequest("POST", "https://api.example.com/charges", strings.NewReader(body))
	rreq, _ := retryablehttp.FromRequest(req) // want `POST retried by go-retryablehttp \(FromRequest\)`
	c.Do(rreq)
}

// A plain client is not a retrying one.
func plain(body string) { // want plain:`sends a POST \(plain\)`
	c := &http.Client{}
	req, _ := http.NewRequest("POST", "https://api.example.com/charges", strings.NewReader(body))
	c.Do(req)
}
