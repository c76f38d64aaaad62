package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ticksPerSecond is USER_HZ, 100 on every Linux this runs on (the same
// assumption trustmsg bench makes).
const ticksPerSecond = 100

// cpuSeconds is the CPU time (user + system, all threads) a process has
// used, from /proc/<pid>/stat; pid 0 is this process.
func cpuSeconds(pid int) (float64, error) {
	name := "self"
	if pid != 0 {
		name = strconv.Itoa(pid)
	}
	stat, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it do not.
	rest := string(stat)
	i := strings.LastIndexByte(rest, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", name)
	}
	fields := strings.Fields(rest[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: too few fields", name)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / ticksPerSecond, nil
}

// databasePid finds the local database server (mariadbd or mysqld): the
// database CPU is read from its process, as trustmsg bench does.
func databasePid() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(comm)); c == "mariadbd" || c == "mysqld" {
			return pid, nil
		}
	}
	return 0, errors.New("no mariadbd or mysqld process on this machine: the database CPU cannot be read")
}

// cpuMeter holds the CPU times at a phase's start.
type cpuMeter struct {
	database, broker int
	services         []int
	start            map[int]float64
}

func newCPUMeter(database int, services []int, broker int) *cpuMeter {
	m := &cpuMeter{database: database, services: services, broker: broker, start: map[int]float64{}}
	for _, pid := range m.pids() {
		m.start[pid], _ = cpuSeconds(pid)
	}
	return m
}

func (m *cpuMeter) pids() []int {
	pids := append([]int{0, m.database}, m.services...)
	if m.broker != 0 {
		pids = append(pids, m.broker)
	}
	return pids
}

func (m *cpuMeter) used(pid int) float64 {
	now, err := cpuSeconds(pid)
	if err != nil {
		return 0
	}
	return now - m.start[pid]
}

// charge sets p's CPU per message, µs, for the n messages of the phase.
func (m *cpuMeter) charge(p *phase, n int) {
	if n == 0 {
		return
	}
	perMessage := func(seconds float64) float64 { return seconds * 1e6 / float64(n) }
	var services float64
	for _, pid := range m.services {
		services += m.used(pid)
	}
	p.DatabaseCPUus = perMessage(m.used(m.database))
	p.ProcessCPUus = perMessage(services)
	p.LoadCPUus = perMessage(m.used(0))
	if m.broker != 0 {
		p.BrokerCPUus = perMessage(m.used(m.broker))
	}
}

// loadAvg is /proc/loadavg's three load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
