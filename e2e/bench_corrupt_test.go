package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkCorruptedRequests sends one `rlctl worker --type echo` process
// 100k requests, each a valid ping, echo or status request with one random
// byte changed (many then claim lengths far beyond their size), and
// reports the worker's resident memory before and after and the slowest
// reply. It stops early if the worker's memory passes 4 GiB (requests says
// how far it got). One iteration: it takes about a minute.
func BenchmarkCorruptedRequests(b *testing.B) {
	const (
		requests = 100_000
		rssStop  = 4 << 30
		timeout  = 30 * time.Second
	)
	c := newCluster(b)
	p := c.worker("echo", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := c.repo().Wait(ctx, c.trial.Worker("echo/0"))
	if err != nil {
		b.Fatal(err)
	}
	var valid [][]byte
	for _, req := range []any{
		[]any{"ping", map[string]any{}},
		[]any{"echo", map[string]any{"msg": "hello, worker", "n": 42, "xs": []any{1.5, "two", nil}}},
		[]any{"status", map[string]any{}},
	} {
		m, err := msgpack.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		valid = append(valid, m)
	}
	s := reqSocket(b, addr)
	defer func() { s.Close() }()
	roundTrip := func(m []byte) ([]byte, bool) {
		if _, err := s.SendBytes(m, 0); err != nil {
			b.Fatal(err)
		}
		poller := zmq.NewPoller()
		poller.Add(s, zmq.POLLIN)
		if ready, err := poller.Poll(timeout); err != nil || len(ready) == 0 {
			// A REQ socket that missed its reply is stuck: start over.
			s.Close()
			s = reqSocket(b, addr)
			return nil, false
		}
		reply, err := s.RecvBytes(0)
		if err != nil {
			b.Fatal(err)
		}
		return reply, true
	}
	for _, m := range valid {
		if _, ok := roundTrip(m); !ok {
			b.Fatal("no reply to a valid request")
		}
	}
	pid := p.cmd.Process.Pid
	before := rssBytes(b, pid)
	peak := before
	rng := rand.New(rand.NewPCG(1, 2))
	var lat benchutil.Latencies
	var sent, ok, errs, timeouts int
	var slowest time.Duration
	lat.Start(requests)
	for sent < requests && peak < rssStop {
		m := append([]byte(nil), valid[rng.IntN(len(valid))]...)
		i := rng.IntN(len(m))
		m[i] ^= byte(1 + rng.IntN(255)) // a different byte
		t := time.Now()
		reply, got := roundTrip(m)
		d := time.Since(t)
		lat.Record(d)
		slowest = max(slowest, d)
		sent++
		switch {
		case !got:
			timeouts++
		case bytes.HasPrefix(reply, []byte("\x81\xa5error")): // {"error": ...}
			errs++
		default:
			ok++
		}
		if sent%100 == 0 {
			peak = max(peak, rssBytes(b, pid))
		}
	}
	after := rssBytes(b, pid)
	const mb = 1 << 20
	b.ReportMetric(float64(sent), "requests")
	b.ReportMetric(float64(before)/mb, "rss-before-MB")
	b.ReportMetric(float64(after)/mb, "rss-after-MB")
	b.ReportMetric(float64(max(peak, after))/mb, "rss-peak-MB")
	b.ReportMetric(float64(slowest)/float64(time.Millisecond), "max-reply-ms")
	b.ReportMetric(float64(errs), "error-replies")
	b.ReportMetric(float64(ok), "ok-replies")
	b.ReportMetric(float64(timeouts), "timeouts")
	lat.Report(b, "us")
	b.ReportMetric(0, "ns/op")
}

// reqSocket is a REQ socket connected to addr.
func reqSocket(b *testing.B, addr string) *zmq.Socket {
	s, err := zmq.NewSocket(zmq.REQ)
	if err != nil {
		b.Fatal(err)
	}
	s.SetLinger(0)
	if err := s.Connect("tcp://" + addr); err != nil {
		b.Fatal(err)
	}
	return s
}

// rssBytes is the resident memory of process pid, from /proc/{pid}/status.
func rssBytes(b *testing.B, pid int) int64 {
	for _, line := range strings.Split(readFile(b, fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if rest, found := strings.CutPrefix(line, "VmRSS:"); found {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("parse %q: %v", line, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS for process %d", pid)
	return 0
}
