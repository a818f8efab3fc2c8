package sdk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/retryhttp/retryhttp"
)

// fakeAnthropic answers POST /v1/messages: overloaded (529) failures
// times, then a message. It records X-Stainless-Retry-Count.
func fakeAnthropic(failures int) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var counts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		counts = append(counts, r.Header.Get("X-Stainless-Retry-Count"))
		n := len(counts)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n <= failures {
			w.Header().Set("Retry-After-Ms", "20")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-5-5",
			"content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	return srv, &counts
}

func newAnthropic(url string, client *http.Client, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithAPIKey("sk-ant-test"), option.WithBaseURL(url),
		option.WithHTTPClient(client)}, opts...)...)
}

func hello(c anthropic.Client) (*anthropic.Message, error) {
	return c.Messages.New(context.Background(), anthropic.MessageNewParams{
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
		Model:     anthropic.ModelClaudeHaiku5_5,
	})
}

// anthropic-sdk-go (and openai-go: both Stainless SDKs): retries off with
// option.WithMaxRetries(0); the Transport retries, waiting what the
// server's Retry-After-Ms says.
func Example_anthropic() {
	srv, counts := fakeAnthropic(2)
	defer srv.Close()
	// These APIs take no Idempotency-Key, and a POST without one is not
	// re-sent once it may have reached the server. InjectIdempotencyKey
	// makes it retryable: a 429 or an overload was not processed; an
	// answer lost after the model ran costs a second completion.
	client := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true}}
	msg, err := hello(newAnthropic(srv.URL, client, option.WithMaxRetries(0)))
	if err != nil {
		panic(err)
	}
	fmt.Println(msg.Content[0].Text)
	fmt.Println("attempts:", len(*counts))
	// Output:
	// Hello!
	// attempts: 3
}

// The SDK's default retries (2) left on over the Transport's (4 attempts):
// the Transport reads X-Stainless-Retry-Count and sends the SDK's retries
// once: R + S − 1 = 6 on the wire, not 12.
func TestAnthropicStackedRetries(t *testing.T) {
	srv, counts := fakeAnthropic(1 << 30)
	defer srv.Close()
	client := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget, Policy: retryhttp.Policy{BaseDelay: time.Millisecond}}}
	if _, err := hello(newAnthropic(srv.URL, client)); err == nil {
		t.Fatal("an API that is down returned no error")
	}
	if got := len(*counts); got != 4+3-1 {
		t.Fatalf("%d attempts on the wire (retry counts %v), want R + S − 1 = 6", got, *counts)
	}
}
