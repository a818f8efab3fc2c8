// Package safe_paced sends the requests it is given one after another,
// paced; it names no key header, so a loop that resent one request whose
// method it does not know would be reported here.
package safe_paced

import (
	"net/http"
	"time"
)

func sendAll(c *http.Client, reqs []*http.Request) {
	for _, r := range reqs {
		if resp, err := c.Do(r); err == nil {
			resp.Body.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
}
