package sdk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/retryhttp/retryhttp"
)

// go-openai has no retries of its own. OpenAI rate-limits with
// x-ratelimit-reset-requests and no Retry-After: the Transport's default
// RetryHints read it, so the call waits out the stated reset, once, and
// succeeds, where retries on a plain backoff would spend their attempts in
// milliseconds.
func Example_openAI() {
	var calls atomic.Int32
	var first time.Time
	var waited time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
			w.Header().Set("X-Ratelimit-Reset-Requests", "1s")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests"}}`)
			return
		}
		waited = time.Since(first)
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()

	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.URL + "/v1"
	// go-openai sends no Idempotency-Key, and a POST without one is not
	// re-sent once it may have reached the server. InjectIdempotencyKey
	// makes it retryable: a 429 was not processed; an answer lost after the
	// model ran costs a second completion.
	cfg.HTTPClient = &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true}}
	client := openai.NewClientWithConfig(cfg)
	resp, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    openai.GPT4oMini,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Hi"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Choices[0].Message.Content)
	fmt.Println("calls:", calls.Load(), "waited for the reset:", waited >= time.Second)
	// Output:
	// Hello!
	// calls: 2 waited for the reset: true
}
