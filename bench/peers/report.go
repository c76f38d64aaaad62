package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
)

func writeResult(path string, r *result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	printRun(r)
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// printRun is one system's run as it ends.
func printRun(r *result) {
	c, o := r.Closed, r.Open
	fmt.Printf("%s %s %s: %.0f msg/s (%d producers, %d msg in %.1f s); per msg: database %.0f µs, process %.0f µs",
		r.Label, r.System, r.Version, c.PerSecond, r.Concurrency, c.Messages, c.Seconds, c.DatabaseCPUus, c.ProcessCPUus)
	if c.BrokerCPUus > 0 {
		fmt.Printf(", Kafka broker %.0f µs", c.BrokerCPUus)
	}
	fmt.Printf(", load generator %.0f µs\n", c.LoadCPUus)
	fmt.Printf("%s %s open loop at %.0f msg/s: prepare→delivery p50 %.1f ms, p99 %.1f ms, max %.1f ms; answer→delivery p50 %.1f ms, p99 %.1f ms (%d msg, %d failed)\n",
		r.Label, r.System, o.Rate, o.P50ms, o.P99ms, o.MaxMs, o.AnswerP50ms, o.AnswerP99ms, o.Messages, o.Failed)
	for _, w := range r.Warnings {
		fmt.Printf("%s %s warning: %s\n", r.Label, r.System, w)
	}
}

func reportCommand(paths []string) error {
	if len(paths) == 0 {
		return errors.New("report needs result files")
	}
	by := map[string][]*result{}
	fmt.Println()
	fmt.Printf("%-6s %-9s %-8s %8s %12s %12s %10s %8s %8s %8s\n",
		"run", "system", "version", "msg/s", "db µs/msg", "proc µs/msg", "broker µs", "½ msg/s", "p50 ms", "p99 ms")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		by[r.System] = append(by[r.System], &r)
		c, o := r.Closed, r.Open
		fmt.Printf("%-6s %-9s %-8s %8.0f %12.0f %12.0f %10.0f %8.0f %8.1f %8.1f\n",
			r.Label, r.System, r.Version, c.PerSecond, c.DatabaseCPUus, c.ProcessCPUus, c.BrokerCPUus,
			o.Rate, o.P50ms, o.P99ms)
	}
	for _, rs := range [][]*result{by["trustmsg"], by["dtm"]} {
		for _, r := range rs {
			for _, w := range r.Warnings {
				fmt.Printf("%s %s: %s\n", r.Label, r.System, w)
			}
		}
	}
	tm, dtm := by["trustmsg"], by["dtm"]
	if len(tm) == 0 || len(dtm) == 0 {
		return errors.New("report needs runs of both trustmsg and dtm")
	}
	rate := func(r *result) float64 { return r.Closed.PerSecond }
	dbCPU := func(r *result) float64 { return r.Closed.DatabaseCPUus }
	for i := range min(len(tm), len(dtm)) {
		fmt.Printf("%s: trustmsg/dtm msg/s ×%.2f, database cpu/msg ×%.2f\n",
			tm[i].Label, rate(tm[i])/rate(dtm[i]), dbCPU(tm[i])/dbCPU(dtm[i]))
	}
	if len(tm) > 1 {
		fmt.Printf("medians of %d runs each:\n", len(tm))
	}
	fmt.Printf("peers: trustmsg/dtm msg/s ×%.2f, database cpu/msg ×%.2f\n",
		median(tm, rate)/median(dtm, rate), median(tm, dbCPU)/median(dtm, dbCPU))
	return nil
}

// median is the median of f over rs (a run's figure, for either report).
func median[R any](rs []R, f func(R) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
