package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/shared/testenv"
)

// Each store runs every variant at two levels, briefly, without a failed
// operation (every new key answered 201 unreplayed, every replay
// replayed), and the table names the ratios.
func TestServerbench(t *testing.T) {
	for _, store := range []string{"memory", "redis", "postgres", "mysql"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			b, err := newBackend(ctx, store, where{redis: testenv.RedisAddr(), postgres: testenv.PostgresDSN(), mysql: testenv.MySQLDSN()}, 8)
			if err != nil {
				addr := map[string]string{"redis": testenv.RedisAddr(), "postgres": testenv.PostgresDSN(), "mysql": testenv.MySQLDSN()}[store]
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
			checkTrips(t, store, rep)
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

// roundTrips is what each variant sends a network store per operation,
// at most: a new key is a claim and a completion, a replay one claim
// that reads the record, as the floors are. On MySQL a claim of a stored
// key is two: its INSERT is refused, then it reads.
// A cached replay sends nothing.
var roundTrips = [nVariants]float64{vFloorNew: 2, vNew: 2, vFloorRead: 1, vClaim: 1, vReplay: 1, vReplayCached: 0}

var mysqlRoundTrips = [nVariants]float64{vFloorNew: 2, vNew: 2, vFloorRead: 1, vClaim: 2, vReplay: 2, vReplayCached: 0}

func checkTrips(t *testing.T, store string, rep *report) {
	t.Helper()
	for li, level := range rep.levels {
		for v, ss := range rep.samples[li] {
			for _, s := range ss {
				want := roundTrips[v]
				switch store {
				case "memory":
					want = 0
				case "mysql":
					want = mysqlRoundTrips[v]
				}
				if s.trips != want {
					t.Errorf("%s %s at %d: %.2f round trips per operation, want %.0f", store, variantNames[v], level, s.trips, want)
				}
			}
		}
	}
}

// A fleet: two processes of serverbench's own on one store, run at once;
// their requests all count, each still two round trips per new key and
// one per replay.
func TestFleet(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			at := where{redis: testenv.RedisAddr(), postgres: testenv.PostgresDSN()}
			ctx := context.Background()
			b, err := newBackend(ctx, store, at, 2)
			if err != nil {
				testenv.Unreachable(t, store, at.redis+" or "+at.postgres, err)
			}
			b.close()
			t.Setenv(asChild, "1") // the children are this test binary
			cfg := config{levels: []int{2}, rounds: 2, duration: 30 * time.Millisecond, keys: 20}
			cfg.run[vNew], cfg.run[vReplay] = true, true
			rep, err := runFleet(ctx, store, at, cfg, 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []int{vNew, vReplay} {
				if ss := rep.samples[0][v]; len(ss) != cfg.rounds || ss[0].rps <= 0 {
					t.Errorf("%s: %+v", variantNames[v], ss)
				}
			}
			checkTrips(t, store, rep)
			var out bytes.Buffer
			rep.print(&out)
			if want := "| 2 | new key |"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "2 processes") {
				t.Errorf("table lacks %q or the process count:\n%s", want, out.String())
			}
		})
	}
}

// asChild, set in the environment, makes the test binary a fleet's
// child: serverbench's main with the arguments its parent gave.
const asChild = "SERVERBENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(asChild) == "1" {
		os.Exit(serverbench())
	}
	os.Exit(m.Run())
}
