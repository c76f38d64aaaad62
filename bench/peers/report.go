package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
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
	for _, o := range append(r.Rates, o) {
		fmt.Printf("%s %s open loop at %.0f msg/s: prepare→delivery p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms; the producer's calls p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms; answer→delivery p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms (%d msg, %d failed)\n",
			r.Label, r.System, o.Rate, o.P50ms, o.P99ms, o.P999ms, o.MaxMs, o.CallsP50ms, o.CallsP99ms, o.CallsP999ms,
			o.AnswerP50ms, o.AnswerP99ms, o.AnswerP999ms, o.Messages, o.Failed)
		if w := worstLine(o); w != "" {
			fmt.Printf("%s %s %s\n", r.Label, r.System, w)
		}
		printBudget(r.Label, r.System, o)
	}
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
	var curve curve
	for _, r := range append(append([]*result{}, tm...), dtm...) {
		for _, p := range r.Rates {
			curve.add(fmt.Sprintf("%.0f", p.Rate), r.System, p)
		}
		curve.add("½ peak", r.System, r.Open)
	}
	curve.print("msg/s", "prepare→delivery", "prepare+commit")
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

// curve is the open loops of several systems and runs, by rate: the
// medians of each figure over the runs.
type curve struct {
	points []curvePoint
}

type curvePoint struct {
	rate, system string
	phases       []phase
}

func (c *curve) add(rate, system string, p phase) {
	for i := range c.points {
		if c.points[i].rate == rate && c.points[i].system == system {
			c.points[i].phases = append(c.points[i].phases, p)
			return
		}
	}
	c.points = append(c.points, curvePoint{rate: rate, system: system, phases: []phase{p}})
}

// print is the curve as a table, a rate's systems side by side; unit
// names the rates, start the first latency (from the intended start),
// calls the producer's part.
func (c *curve) print(unit, start, calls string) {
	if len(c.points) == 0 {
		return
	}
	sort.SliceStable(c.points, func(i, j int) bool { return rateOrder(c.points[i].rate) < rateOrder(c.points[j].rate) })
	fmt.Printf("\nlatency curve (ms; medians of the runs; p50 / p99 / p99.9):\n")
	fmt.Printf("%-8s %-9s %8s %7s %7s  %-22s %-22s %-22s\n",
		unit, "system", "at msg/s", "msgs", "failed", start, calls, "commit→delivery")
	for _, pt := range c.points {
		f := func(g func(phase) float64) float64 { return median(pt.phases, g) }
		three := func(a, b, c func(phase) float64) string {
			return fmt.Sprintf("%.1f / %.1f / %.1f", f(a), f(b), f(c))
		}
		fmt.Printf("%-8s %-9s %8.0f %7.0f %7.0f  %-22s %-22s %-22s\n",
			pt.rate, pt.system, f(func(p phase) float64 { return p.Rate }),
			f(func(p phase) float64 { return float64(p.Messages) }), f(func(p phase) float64 { return float64(p.Failed) }),
			three(func(p phase) float64 { return p.P50ms }, func(p phase) float64 { return p.P99ms }, func(p phase) float64 { return p.P999ms }),
			three(func(p phase) float64 { return p.CallsP50ms }, func(p phase) float64 { return p.CallsP99ms }, func(p phase) float64 { return p.CallsP999ms }),
			three(func(p phase) float64 { return p.AnswerP50ms }, func(p phase) float64 { return p.AnswerP99ms }, func(p phase) float64 { return p.AnswerP999ms }))
	}
}

// rateOrder sorts fixed rates by their number and the half peak last.
func rateOrder(rate string) float64 {
	v, err := strconv.ParseFloat(rate, 64)
	if err != nil {
		return math.Inf(1)
	}
	return v
}
