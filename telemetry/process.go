package telemetry

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// processCollector is the process_* series a dashboard and an operator
// look at (CPU time, resident memory, open descriptors, start time), read
// with one getrusage call and two small reads of /proc. It replaces
// client_golang's process collector, which also reads the process's
// limits, its status and the network namespace's netstat at every
// scrape: a fifth of a one-worker scrape's CPU time for series nobody
// here uses.
type processCollector struct {
	cpu, rss, fds, start *prometheus.Desc
	started              float64
}

func newProcessCollector() *processCollector {
	return &processCollector{
		cpu:     prometheus.NewDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", nil, nil),
		rss:     prometheus.NewDesc("process_resident_memory_bytes", "Resident memory size in bytes.", nil, nil),
		fds:     prometheus.NewDesc("process_open_fds", "Number of open file descriptors.", nil, nil),
		start:   prometheus.NewDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", nil, nil),
		started: float64(processStarted.UnixNano()) / 1e9,
	}
}

func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.cpu
	ch <- c.rss
	ch <- c.fds
	ch <- c.start
}

func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, cpu.Seconds())
	}
	if rss, ok := residentBytes(); ok {
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, rss)
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		ch <- prometheus.MustNewConstMetric(c.fds, prometheus.GaugeValue, float64(len(names)-1)) // less the one just opened
	}
	ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, c.started)
}

// residentBytes is the second field of /proc/self/statm (pages) in bytes.
func residentBytes() (float64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return float64(pages) * float64(os.Getpagesize()), true
}

// processStarted is when this process began, close enough: when the
// package was initialised.
var processStarted = time.Now()
