// Command instances measures what more instances of Countersign on one
// PostgreSQL add: 1, 2 and 4 instances (the same number of agents on
// each, so the load grows with the fleet) calling an allowed read of an
// HTTP tool through the gate API, side by side in one run, with
// PostgreSQL reached through a proxy that delays each way (as between
// machines in one region) and with none. It also counts the round trips
// to PostgreSQL per call. BENCHMARKS.md.
//
//	go run ./bench/instances -dsn postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
package main

import (
	"cmp"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	dsn := flag.String("dsn", cmp.Or(os.Getenv("COUNTERSIGN_TEST_POSTGRES"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"a PostgreSQL server where a database may be created for each measurement")
	delays := flag.String("delays", "1ms,0", "the proxy's delay each way, for each series (comma-separated)")
	counts := flag.String("instances", "1,2,4", "how many instances, for each measurement")
	agents := flag.Int("agents", 8, "agents per instance, each calling without pause")
	dur := flag.Duration("for", 10*time.Second, "how long each measurement lasts, after a warm-up of a fifth of it")
	flag.Parse()
	if err := run(*dsn, *delays, *counts, *agents, *dur); err != nil {
		log.Fatal(err)
	}
}

func run(dsn, delays, counts string, agents int, dur time.Duration) error {
	fleets, err := ints(counts)
	if err != nil {
		return err
	}
	for _, d := range strings.Split(delays, ",") {
		delay, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return fmt.Errorf("-delays: %w", err)
		}
		fmt.Printf("\nPostgreSQL %s away each way (%s round trip)\n", delay, 2*delay)
		one, err := measure(dsn, delay, 1, 1, dur/2)
		if err != nil {
			return err
		}
		fmt.Printf("one agent alone:   p50 %7.2f ms  p99 %7.2f ms  %5.1f round trips a call\n", one.p50, one.p99, one.trips)
		var base float64
		for _, n := range fleets {
			r, err := measure(dsn, delay, n, agents, dur)
			if err != nil {
				return err
			}
			if base == 0 {
				base = r.rate
			}
			fmt.Printf("%d instance(s), %d agents: %8.1f calls/s (%.2fx)  p50 %7.2f ms  p99 %7.2f ms  %5.1f round trips a call  cores %3.0f%% busy\n",
				n, n*agents, r.rate, r.rate/base, r.p50, r.p99, r.trips, 100*r.busy)
		}
	}
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-instances: %q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}
