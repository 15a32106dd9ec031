package telemetry

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Namespace prefixes every distrl metric.
const Namespace = "distrl"

// workerLabels are the labels of every worker metric, in this order.
var workerLabels = []string{"experiment", "trial", "type", "index", "group"}

func with(extra ...string) []string { return append(append([]string(nil), workerLabels...), extra...) }

// Buckets of the histograms.
var (
	// batchBuckets: rows per forward pass, 1 to 8192.
	batchBuckets = prometheus.ExponentialBuckets(1, 2, 14)
	// latencyBuckets: 10 µs to about 0.6 s.
	latencyBuckets = prometheus.ExponentialBuckets(10e-6, 2.5, 13)
	// lagBuckets: parameter versions.
	lagBuckets = []float64{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64}
)

// Registry is a process's metrics: the distrl families, and a private
// prometheus.Registry holding the Go and process collectors and any the
// caller adds (Prometheus). Its zero value is not usable; create it with
// NewRegistry.
type Registry struct {
	reg  *prometheus.Registry
	fams []family // the distrl families, gathered without reg (gather.go)

	state       *prometheus.GaugeVec
	polls       *prometheus.CounterVec
	pollSeconds *prometheus.CounterVec
	rpc         *prometheus.CounterVec
	heartbeat   *heartbeatCollector

	envSteps      *prometheus.CounterVec
	episodes      *prometheus.CounterVec
	episodeReturn *prometheus.GaugeVec
	inferFailures *prometheus.CounterVec
	backpressured *prometheus.CounterVec

	batchSize *prometheus.HistogramVec
	queueWait *prometheus.HistogramVec
	forward   *prometheus.HistogramVec
	version   *prometheus.GaugeVec

	samplesTrained *prometheus.CounterVec
	droppedStale   *prometheus.CounterVec
	updates        *prometheus.CounterVec
	policyLag      *prometheus.HistogramVec
	loss           *prometheus.GaugeVec
	checkpoints    *prometheus.CounterVec
	groupReforms   *prometheus.CounterVec
	allreduceSecs  *prometheus.CounterVec
	updateSecs     *prometheus.CounterVec
	loopSecs       *prometheus.CounterVec

	replayItems   *prometheus.GaugeVec
	replayInserts *prometheus.CounterVec
	replaySamples *prometheus.CounterVec
	limiterWaits  *prometheus.CounterVec

	sinkSamples *prometheus.CounterVec

	mu      sync.Mutex
	workers map[*Worker]struct{}
}

// NewRegistry returns a registry with the Go and process collectors and
// every distrl family registered (families without series are not
// exposed).
func NewRegistry() *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), workers: map[*Worker]struct{}{}}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, with(extra...))
		r.add(v, name, help, dto.MetricType_COUNTER, with(extra...))
		return v
	}
	gauge := func(name, help string, extra ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, with(extra...))
		r.add(v, name, help, dto.MetricType_GAUGE, with(extra...))
		return v
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, workerLabels)
		r.add(v, name, help, dto.MetricType_HISTOGRAM, workerLabels)
		return v
	}
	r.reg.MustRegister(collectors.NewGoCollector(), newProcessCollector())

	r.state = gauge("worker_state", "1 for the worker's lifecycle state, 0 for the others.", "state")
	r.polls = counter("worker_polls_total", "Slices of work (Poll calls) the worker loop ran for the worker.")
	r.pollSeconds = counter("worker_poll_seconds_total", "Time the worker loop spent in the worker's Poll: its busy time.")
	r.rpc = counter("rpc_requests_total", "Requests the worker answered, by command and outcome (ok or the error type).", "command", "outcome")
	const heartbeatHelp = "Time since the loop that runs the worker last turned; it grows while the loop is stuck."
	r.heartbeat = &heartbeatCollector{r: r, desc: prometheus.NewDesc(Namespace+"_loop_heartbeat_age_seconds", heartbeatHelp, workerLabels, nil)}
	r.add(r.heartbeat, "loop_heartbeat_age_seconds", heartbeatHelp, dto.MetricType_GAUGE, workerLabels)

	r.envSteps = counter("env_steps_total", "Environment steps the actor took.")
	r.episodes = counter("episodes_total", "Episodes that ended (actor, sink, trainer).")
	r.episodeReturn = gauge("episode_return", "Mean return of the last 20 episodes that ended.")
	r.inferFailures = counter("actor_inference_failures_total", "Inference requests of the actor that failed or timed out.")
	r.backpressured = counter("actor_backpressured_seconds_total", "Seconds the actor held sample batches its consumers had no room for.")

	r.batchSize = histogram("inference_batch_size", "Rows per forward pass of the policy worker.", batchBuckets)
	r.queueWait = histogram("inference_queue_wait_seconds", "Time an inference request waited in the policy worker before its forward pass began.", latencyBuckets)
	r.forward = histogram("inference_forward_seconds", "Time of one forward pass of the policy worker, sampling included.", latencyBuckets)
	r.version = gauge("policy_version", "Parameter version the worker serves (policy) or trained (trainer).")

	r.samplesTrained = counter("trainer_samples_total", "Samples (env steps) the trainer learned from.")
	r.droppedStale = counter("trainer_samples_dropped_stale_total", "Samples the trainer dropped as too stale for its bound.")
	r.updates = counter("trainer_updates_total", "Parameter updates the trainer made.")
	r.policyLag = histogram("policy_lag", "Versions between the parameters a batch was collected with and the trainer's.", lagBuckets)
	r.loss = gauge("trainer_loss", "The trainer's last value of each of its losses and figures (policy, value, entropy, approx_kl, td, q).", "loss")
	r.checkpoints = counter("trainer_checkpoints_total", "Checkpoints the trainer wrote.")
	r.groupReforms = counter("trainer_group_reforms_total", "Times the trainer's data-parallel group broke and formed again.")
	r.allreduceSecs = counter("trainer_allreduce_seconds_total", "Seconds the trainer spent in its group's all-reduces, waiting for its members included.")
	r.updateSecs = counter("trainer_update_seconds_total", "Seconds the trainer's learner spent in updates, on the worker loop or beside it.")
	r.loopSecs = counter("trainer_loop_seconds_total", "Seconds the trainer's worker loop was busy outside updates: taking samples in, publishing, checkpointing.")

	r.replayItems = gauge("replay_items", "Items the replay table holds.", "table")
	r.replayInserts = counter("replay_inserts_total", "Items inserted into the replay table.", "table")
	r.replaySamples = counter("replay_samples_total", "Items sampled from the replay table.", "table")
	r.limiterWaits = counter("replay_rate_limiter_waits_total", "Requests the replay table's rate limiter held back.", "table")

	r.sinkSamples = counter("sink_samples_total", "Samples (env steps) the sink received.")
	return r
}

// Prometheus is the registry of the Go and process collectors, for
// collectors of the caller's own (the dashboard's trial metrics). Gather
// and Handler serve it with the distrl families.
func (r *Registry) Prometheus() *prometheus.Registry { return r.reg }

// Handler serves the registry (Gather) in the Prometheus text format at
// /metrics and nothing else: other paths are 404. At most two scrapes run
// at once; more are refused with 503. Responses are not compressed: a
// scrape travels over a LAN or loopback, and gzip took a sixth of its CPU
// time, which the worker loops beside it need more.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", &scrapeHandler{r: r, slots: make(chan struct{}, scrapesInFlight)})
	return mux
}

// heartbeatCollector reports each worker's loop heartbeat age at scrape
// time: a gauge set by the loop would stop changing exactly when the loop
// does.
type heartbeatCollector struct {
	r    *Registry
	desc *prometheus.Desc
}

func (c *heartbeatCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *heartbeatCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for w := range c.r.workers {
		l := w.loop.Load()
		if l == nil {
			continue
		}
		last := l.last.Load()
		if last == 0 {
			continue
		}
		age := now.Sub(time.Unix(0, last)).Seconds()
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, max(age, 0), w.labels...)
	}
}
