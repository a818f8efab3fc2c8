package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/testenv"
)

// Each store runs every variant at two levels, briefly, without a failed
// operation (every new key answered 201 unreplayed, every replay
// replayed), and the table names the ratios.
func TestServerbench(t *testing.T) {
	for _, store := range []string{"memory", "redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			b, err := newBackend(ctx, store, testenv.RedisAddr(), testenv.PostgresDSN(), 8)
			if err != nil {
				addr := testenv.RedisAddr()
				if store == "postgres" {
					addr = testenv.PostgresDSN()
				}
				testenv.Unreachable(t, store, addr, err)
			}
			defer b.close()
			cfg := config{levels: []int{1, 4}, rounds: 2, duration: 20 * time.Millisecond, keys: 20}
			for v := range cfg.run {
				cfg.run[v] = true
			}
			rep, err := run(ctx, b, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for li := range cfg.levels {
				for v, ss := range rep.samples[li] {
					if len(ss) != cfg.rounds || ss[0].rps <= 0 {
						t.Errorf("%s at %d: %d samples, first %+v", variantNames[v], cfg.levels[li], len(ss), ss)
					}
				}
			}
			var out bytes.Buffer
			rep.print(&out)
			for _, want := range []string{"| 4 | replay |", store + ": new key at", store + ": replay at", "Noise:"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
