package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/retryhttp/retryhttp/idempotency"
	"github.com/retryhttp/retryhttp/queue"
	"github.com/retryhttp/retryhttp/queue/rabbitmq"
	"github.com/retryhttp/retryhttp/shared/faultproxy"
	"github.com/retryhttp/retryhttp/shared/testenv"
)

// 1,000 orders consumed through a TCP proxy that cuts every connection to
// the broker three times mid-stream: the broker requeues what the cut
// channel held unacknowledged (acks in flight lost with it), the consumer
// dials again, and each order's effect happens once.
func TestConnectionsCut(t *testing.T) {
	conn := dial(t) // the publisher's, direct
	q := testQueue(t, conn)
	u, err := url.Parse(testenv.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	u.Host = proxy.Addr()

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	const orders = 1000
	for i := range orders {
		if err := ch.PublishWithContext(context.Background(), "", q, false, false,
			amqp.Publishing{MessageId: fmt.Sprint("msg-", i), Body: []byte(fmt.Sprint("order-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	runner, err := idempotency.NewRunner(idempotency.RunnerOptions{Kind: "fulfilment", LockTimeout: 3 * time.Second, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	effects := map[string]int{}
	handle, err := rabbitmq.Handler(rabbitmq.Options{Runner: runner, Logger: quietLog,
		Backoff: queue.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	}, func(ctx context.Context, d amqp.Delivery) ([]byte, error) {
		time.Sleep(200 * time.Microsecond) // the effect takes a moment: a cut lands mid-message
		mu.Lock()
		effects[string(d.Body)]++
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	done := func() int { mu.Lock(); defer mu.Unlock(); return len(effects) }

	// The consumer: dial through the proxy, consume until the connection
	// dies, dial again; until every order is handled.
	stop := make(chan struct{})
	consumerDone := make(chan struct{})
	var dials int
	go func() {
		defer close(consumerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := amqp.DialConfig(u.String(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			dials++
			cch, err := c.Channel()
			if err == nil {
				err = cch.Qos(100, 0, false)
			}
			var ds <-chan amqp.Delivery
			if err == nil {
				ds, err = cch.Consume(q, "", false, false, false, false, nil)
			}
			if err != nil {
				c.Close()
				continue
			}
			var wg sync.WaitGroup
		consume:
			for {
				select {
				case <-stop:
					break consume
				case d, ok := <-ds:
					if !ok {
						break consume // the cut closed the channel
					}
					wg.Go(func() { handle(context.Background(), d) })
				}
			}
			wg.Wait()
			c.Close()
		}
	}()
	for _, at := range []int{orders / 4, orders / 2, 3 * orders / 4} {
		for deadline := time.Now().Add(20 * time.Second); done() < at; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d orders handled before the cut, want %d", done(), at)
			}
		}
		proxy.CutAll()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		if err == nil && st.Messages == 0 && done() == orders {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders handled after the cuts", done(), orders)
		}
	}
	close(stop)
	proxy.CutAll() // end the consumer's wait on its deliveries
	<-consumerDone
	mu.Lock()
	defer mu.Unlock()
	for k, n := range effects {
		if n != 1 {
			t.Errorf("%s: %d effects, want 1", k, n)
		}
	}
	if dials < 4 {
		t.Errorf("the consumer dialled %d times, want one more after each of the 3 cuts", dials)
	}
}
