package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/idempotency/redisstore"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/natsjs"
)

// The third layer: "order placed" events on NATS JetStream, and a
// fulfilment consumer, a process of its own, that calls the shipping
// provider for each. The consumer is killed with SIGKILL while it works
// and started again, so messages it was handling are redelivered by
// JetStream once their ack wait passes.

// consumerRole, set in a child's environment, makes this program (or
// the test binary) the fulfilment consumer, with its arguments.
const consumerRole = "CHECKOUT_FULFILMENT"

// fulfilment is what a consumer process needs to know.
type fulfilment struct {
	NATS, Stream, Durable string
	Redis, Prefix         string // the Runner's store, shared by every consumer process
	Shipping              string // the provider's URL
	Pieces                bool
}

func (f fulfilment) args() []string {
	return []string{"-nats", f.NATS, "-stream", f.Stream, "-durable", f.Durable, "-redis", f.Redis, "-prefix", f.Prefix,
		"-shipping", f.Shipping, fmt.Sprintf("-pieces=%v", f.Pieces)}
}

// consume is the consumer process: it handles messages until it is
// killed.
func consume(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("fulfilment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f fulfilment
	fs.StringVar(&f.NATS, "nats", "", "NATS URL")
	fs.StringVar(&f.Stream, "stream", "", "stream")
	fs.StringVar(&f.Durable, "durable", "", "durable consumer")
	fs.StringVar(&f.Redis, "redis", "", "Redis address")
	fs.StringVar(&f.Prefix, "prefix", "", "Redis key prefix")
	fs.StringVar(&f.Shipping, "shipping", "", "shipping provider URL")
	fs.BoolVar(&f.Pieces, "pieces", false, "run each message once per order")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "fulfilment:", err); return 1 }
	nc, err := nats.Connect(f.NATS)
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	cons, err := js.Consumer(ctx, f.Stream, f.Durable)
	if err != nil {
		return fail(err)
	}
	toShipping := &http.Client{Transport: &retryhttp.Transport{InjectIdempotencyKey: true, Budget: retryhttp.NoBudget, Logger: quiet,
		Policy: retryhttp.Policy{MaxAttempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}}
	ship := func(ctx context.Context, m jetstream.Msg) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.Shipping+"/v1/shipments", strings.NewReader(string(m.Data())))
		req.Header.Set("Content-Type", "application/json")
		resp, err := toShipping.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("shipping answered %d", resp.StatusCode)
		}
		return nil
	}
	var handler jetstream.MessageHandler
	if f.Pieces {
		rdb := redis.NewClient(&redis.Options{Addr: f.Redis})
		// The demo's keys live only as long as the demo: its Redis need not
		// persist them, so the store's warning about that is not shown.
		store, err := redisstore.New(rdb, redisstore.Options{Prefix: f.Prefix, Logger: quiet})
		if err != nil {
			return fail(err)
		}
		runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Store: store, Kind: "fulfilment", LockTimeout: 2 * time.Second, Logger: quiet})
		if err != nil {
			return fail(err)
		}
		handler, err = natsjs.Handler(natsjs.Options{Runner: runner, Logger: quiet,
			Key:     orderKey, // the business key: the order, whichever message carries it
			Backoff: queue.Backoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		}, func(ctx context.Context, m jetstream.Msg) ([]byte, error) {
			return nil, ship(ctx, m) // ctx carries the order: the shipment's key is the same on every delivery
		})
		if err != nil {
			return fail(err)
		}
	} else {
		handler = func(m jetstream.Msg) { // each layer on its own: ship, then ack
			if err := ship(context.Background(), m); err != nil {
				m.NakWithDelay(50 * time.Millisecond)
				return
			}
			m.Ack()
		}
	}
	if _, err := cons.Consume(handler, jetstream.PullMaxMessages(32)); err != nil {
		return fail(err)
	}
	select {} // until killed
}

// fleet runs consumer processes one after another, killing each with
// SIGKILL after about every (a random fraction of it more), until stop;
// the last runs until stop. It returns how many it killed.
func fleet(stop <-chan struct{}, f fulfilment, every time.Duration, coin *chance, stderr io.Writer) (killed int, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	for {
		cmd := exec.Command(self, f.args()...)
		cmd.Env = append(os.Environ(), consumerRole+"=1")
		cmd.Stdout, cmd.Stderr = io.Discard, stderr
		if err := cmd.Start(); err != nil {
			return killed, err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		life := every + time.Duration(coin.float()*float64(every))
		t := time.NewTimer(life)
		select {
		case <-stop:
			t.Stop()
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			return killed, nil
		case err := <-exited:
			t.Stop()
			return killed, fmt.Errorf("the fulfilment consumer exited: %v", err)
		case <-t.C:
			cmd.Process.Signal(syscall.SIGKILL) // mid-message, most likely
			<-exited
			killed++
		}
	}
}

// stream makes the run's stream and durable consumer: a short ack wait,
// so that what a killed consumer held comes back soon.
func stream(ctx context.Context, js jetstream.JetStream, name, subject string) (func(), error) {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		return nil, err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "fulfilment",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second}); err != nil {
		js.DeleteStream(ctx, name)
		return nil, err
	}
	return func() { js.DeleteStream(context.WithoutCancel(ctx), name) }, nil
}

// drained reports whether the durable consumer has acknowledged every
// message of the stream.
func drained(ctx context.Context, js jetstream.JetStream, name string) (bool, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return false, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return false, err
	}
	c, err := s.Consumer(ctx, "fulfilment")
	if err != nil {
		return false, err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return false, err
	}
	return ci.NumAckPending == 0 && ci.NumPending == 0 && ci.AckFloor.Stream >= info.State.LastSeq, nil
}

var errNotDrained = errors.New("the fulfilment consumer did not finish the stream in time")

// orderKey is an event's business key: its order.
func orderKey(m jetstream.Msg) (string, error) {
	var e orderBody
	if err := json.Unmarshal(m.Data(), &e); err != nil {
		return "", err
	}
	return fmt.Sprint("order-", e.Order), nil
}
