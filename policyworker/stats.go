package policyworker

import (
	"slices"
	"time"

	"github.com/distrl/distrl/worker/member"
)

// window is how many recent batches the latency percentile and the
// throughput are computed over: enough for a stable median, recent enough
// to show a change of load within seconds.
const window = 1000

// batchRecord is one served batch in the sliding window.
type batchRecord struct {
	end   time.Time
	rows  int
	infer time.Duration
}

// counters are the figures behind Stats, reset by every configure since a
// new configuration starts a new policy.
type counters struct {
	batches, rows int64
	maxBatch      int
	inferErrors   int64

	recent      [window]batchRecord // ring buffer
	next, count int                 // next slot to write; slots in use
	since       time.Time           // start of the span the ring covers
}

func (c *counters) record(begin, end time.Time, rows int, infer time.Duration) {
	c.batches++
	c.rows += int64(rows)
	c.maxBatch = max(c.maxBatch, rows)
	switch {
	case c.count == 0:
		c.since = begin
	case c.count == window:
		// The evicted batch ended where the span now starts.
		c.since = c.recent[c.next].end
	}
	c.recent[c.next] = batchRecord{end: end, rows: rows, infer: infer}
	c.next = (c.next + 1) % window
	c.count = min(c.count+1, window)
}

// queueClock bounds when the requests of a batch arrived. The server does
// not stamp requests as they arrive (they wait in the socket's and the
// shared memory's queues until a Poll takes them), so the worker counts
// each request's wait from the last moment its queues can have been
// empty: an upper bound, exact for a worker that was idle when the request
// came. The queues were empty at the end of a take that found fewer rows
// than max_batch; one that filled its batch may have left older requests
// behind, so the bound stays where it was; and after a poll that found
// none the loop slept until input woke it, so the bound is the start of
// the poll after.
type queueClock struct {
	since time.Time // requests waiting now arrived after it
	busy  bool      // the last poll took requests: the loop did not sleep
}

// empty records a poll that took no request.
func (q *queueClock) empty() { q.busy = false }

// took records a poll that began at now and finished taking rows rows
// (max_batch maxBatch) at taken, and returns the bound of their arrival.
func (q *queueClock) took(now, taken time.Time, rows, maxBatch int) time.Time {
	if !q.busy {
		q.since = now
	}
	since := q.since
	if rows < maxBatch {
		q.since = taken
	}
	q.busy = true
	return since
}

// observe records a served batch in Prometheus: its rows, each of its
// requests' wait and its forward pass. All requests of a batch share the
// bound of their wait (queueClock), observed once per request as the
// histogram counts requests.
func (w *Worker) observe(rows, requests int, wait, forward time.Duration) {
	m := w.metrics
	m.BatchSize.Observe(float64(rows))
	m.Forward.Observe(forward.Seconds())
	for range requests {
		m.QueueWait.Observe(wait.Seconds())
	}
}

// Stats reports the serving figures. infer_ms_p50 (the median time of the
// forward pass and sampling, without the network) and rows_per_s are over
// the last 1000 batches, the latter up to now so that it falls to zero
// when requests stop; the other counts are since the last configure.
// param_version is the newest published version obtained (-1: none yet;
// version is what the policy runs, which load_params may have set), and
// param_fetches_network and param_cache_hits say how it was obtained: over
// the network, or from the node cache another policy worker filled.
func (w *Worker) Stats() map[string]any {
	s := &w.stats
	out := map[string]any{
		"policy":         w.cfg.Policy,
		"batches":        s.batches,
		"rows":           s.rows,
		"max_batch_seen": s.maxBatch,
		"infer_errors":   s.inferErrors,
		"mean_batch":     0.0,
		"infer_ms_p50":   0.0,
		"rows_per_s":     0.0,
	}
	if s.batches > 0 {
		out["mean_batch"] = float64(s.rows) / float64(s.batches)
	}
	if s.count > 0 {
		lat := make([]time.Duration, 0, s.count)
		var rows int
		for _, r := range s.recent[:s.count] {
			lat = append(lat, r.infer)
			rows += r.rows
		}
		out["infer_ms_p50"] = median(lat).Seconds() * 1e3
		if span := time.Since(s.since).Seconds(); span > 0 {
			out["rows_per_s"] = float64(rows) / span
		}
	}
	if w.kept != nil {
		w.kept.stats(out)
	}
	if w.policy != nil {
		out[member.StatVersion] = w.policy.Version()
		out["num_params"] = w.policy.NumParams()
	}
	if w.server != nil {
		st := w.server.Stats()
		out["messages"] = st.Messages
		out["malformed"] = st.Malformed
		out["refused"] = st.Refused
		out["undeliverable"] = st.Undeliverable
		out["shm_clients"] = w.server.SharedMemoryClients()
	}
	if w.params != nil {
		st := w.params.Stats()
		out["param_version"] = st.Version
		out["param_fetches_network"] = st.NetworkFetches
		out["param_cache_hits"] = st.CacheHits
		out["param_fetch_failures"] = st.FetchFailures
	}
	return out
}

// median returns the middle element of d (the upper one for an even
// count), reordering d.
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
