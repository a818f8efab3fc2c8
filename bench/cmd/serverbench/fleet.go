package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// A fleet is several middleware processes on one store, as a service
// runs behind a load balancer: serverbench starts procs copies of itself
// (-child), each with its own middleware and connection pool, and has
// them run each variant at the same moment. Their throughputs add up and
// their latencies pool into one p99.
//
// A child reads one command per line on stdin and answers on stdout, in
// JSON: a command names a variant; the child gets ready for it (storing
// the replays' keys again) and answers ready, waits for a line "go",
// runs the variant and answers its raw results.
type command struct {
	Variant  int
	Conc     int
	Duration time.Duration
}

type ready struct {
	Err string
}

type result struct {
	Raw *raw
	Err string
}

// child is the -child side of a fleet.
func child(ctx context.Context, name string, at where, keys, conns int) error {
	b, err := newBackend(ctx, name, at, conns)
	if err != nil {
		return err
	}
	defer b.close()
	w, err := prepare(ctx, b, keys)
	if err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			return fmt.Errorf("child: %w", err)
		}
		var r ready
		if replayed(c.Variant) {
			if err := w.seed(); err != nil {
				r.Err = err.Error()
			}
		}
		if err := out.Encode(r); err != nil {
			return err
		}
		if !in.Scan() {
			break
		}
		m := measure(b, c.Conc, c.Duration, w.ops[c.Variant])
		if err := out.Encode(result{Raw: m}); err != nil {
			return err
		}
	}
	return in.Err()
}

// member is one child process of a fleet, as its parent sees it.
type member struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
}

// runFleet measures store name in procs processes at once.
func runFleet(ctx context.Context, name string, at where, cfg config, procs, conns int) (*report, error) {
	// The parent sets the store up (the table a child shares) and takes
	// it down at the end.
	owner, err := newBackend(ctx, name, at, 2)
	if err != nil {
		return nil, err
	}
	defer owner.close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var fleet []*member
	defer func() {
		for _, m := range fleet {
			m.in.Close()
			m.cmd.Wait()
		}
	}()
	for range procs {
		cmd := exec.CommandContext(ctx, self, "-child", "-stores", name, "-redis", at.redis, "-redis-cluster", at.cluster,
			"-postgres", at.postgres, "-mysql", at.mysql, "-dynamo", at.dynamo, "-keys", strconv.Itoa(cfg.keys), "-conns", strconv.Itoa(conns))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		fleet = append(fleet, &member{cmd: cmd, in: in, out: json.NewDecoder(out)})
	}
	all := func(v, conc int, d time.Duration) (*raw, error) {
		line, _ := json.Marshal(command{Variant: v, Conc: conc, Duration: d})
		for _, m := range fleet {
			fmt.Fprintf(m.in, "%s\n", line)
		}
		for i, m := range fleet {
			var r ready
			if err := m.out.Decode(&r); err != nil {
				return nil, fmt.Errorf("process %d: %w", i, err)
			} else if r.Err != "" {
				return nil, fmt.Errorf("process %d: %s", i, r.Err)
			}
		}
		for _, m := range fleet {
			io.WriteString(m.in, "go\n")
		}
		var rs []*raw
		for i, m := range fleet {
			var r result
			if err := m.out.Decode(&r); err != nil {
				return nil, fmt.Errorf("process %d: %w", i, err)
			}
			rs = append(rs, r.Raw)
		}
		return merge(rs), nil
	}

	rep := &report{store: fmt.Sprintf("%s, %d processes", name, procs), levels: cfg.levels,
		samples: make([][nVariants][]sample, len(cfg.levels)), perProcess: true}
	return rep, rounds(rep, cfg, all)
}
