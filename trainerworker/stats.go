package trainerworker

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/distrl/distrl/algo/dqn"
	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// Windows of the statistics.
const (
	// lagWindow is how many recent batches the policy-lag percentiles
	// cover: enough for a meaningful p99, recent enough to follow a change.
	lagWindow = 1000
	// rateWindow is how many recent updates train_samples_per_s covers.
	rateWindow = 20
)

// counters are the figures behind Stats. Configure resets them, except
// what a checkpoint restores (samples trained, updates, episodes).
type counters struct {
	trained  int64 // agent steps used by updates
	updates  int64
	episodes int64

	rejected, rejectedAtUpdate int64 // batches PPO cannot use; count at the last update
	droppedStale               int64 // batches older than the staleness bound
	droppedFuture              int64 // batches of versions this trainer never made
	droppedSteps               int64 // steps of the dropped batches

	updateFailures, ckptFailures, checkpoints int64

	last       ppo.Stats
	hasLast    bool
	lastUpdate time.Duration

	since   time.Time // first poll after configure
	agents  agentSet  // the agents whose batches it took
	lags    ring      // policy lag of each batch taken, stale ones included
	returns ring      // returns of the latest episodes
	rate    rateRing
}

func newCounters() counters {
	return counters{lags: newRing(lagWindow), returns: newRing(member.ReturnWindow), agents: agentSet{}}
}

// maxAgentsListed bounds the agents stat: a trainer of many actors' many
// agents says how many there are past it, not each.
const maxAgentsListed = 32

// agentSet is the agent ids a trainer took batches of ({actor}:{agent}
// would name every actor's; the agent alone says which of the
// environment's agents its policy plays, the question of a trial of
// several policies).
type agentSet map[string]struct{}

func (s agentSet) add(id string) {
	if _, ok := s[id]; ok || len(s) > maxAgentsListed {
		return
	}
	s[id] = struct{}{}
}

// list is the stat: the ids sorted, or "N+ agents" past maxAgentsListed.
func (s agentSet) list() any {
	if len(s) > maxAgentsListed {
		return fmt.Sprintf("%d+ agents", maxAgentsListed)
	}
	return slices.Sorted(maps.Keys(s))
}

// ring holds the last len(buf) values added.
type ring struct {
	buf   []float64
	next  int
	count int
}

func newRing(size int) ring { return ring{buf: make([]float64, size)} }

func (r *ring) add(v float64) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	r.count = min(r.count+1, len(r.buf))
}

func (r *ring) values() []float64 { return r.buf[:r.count] }

func (r *ring) mean() float64 {
	var s float64
	for _, v := range r.values() {
		s += v
	}
	return s / float64(r.count)
}

// percentile returns the p-th percentile (nearest rank) of vals, sorting a
// copy.
func percentile(vals []float64, p float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// rateRing keeps (time, cumulative count) points of the last rateWindow
// updates, for a throughput that follows changes.
type rateRing struct {
	t []time.Time
	n []int64
}

func (r *rateRing) add(t time.Time, n int64) {
	if len(r.t) == rateWindow+1 {
		r.t, r.n = r.t[1:], r.n[1:]
	}
	r.t, r.n = append(r.t, t), append(r.n, n)
}

// perSecond is the count added over the window up to now, per second: it
// falls when updates stop.
func (r *rateRing) perSecond(now time.Time) float64 {
	if len(r.t) < 2 {
		return 0
	}
	span := now.Sub(r.t[0]).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(r.n[len(r.n)-1]-r.n[0]) / span
}

// metrics records a trainer's figures in Prometheus where the algorithm
// counts them for Stats, per batch or update. Unlike Stats, its counters
// do not start from what a checkpoint restores: they count what this
// process did.
type metrics struct{ *telemetry.Trainer }

// updated records an update on samples steps that made version.
func (m metrics) updated(version int64, samples int64) {
	m.Updates.Inc()
	m.Samples.Add(float64(samples))
	m.Version.Set(float64(version))
}

// ended records n episodes that ended, the latest of which are in returns.
func (m metrics) ended(n int, returns *ring) {
	if n > 0 {
		m.Episodes.Add(float64(n))
		m.Return.Set(returns.mean())
	}
}

// ppoLosses and dqnLosses set the losses of an update, a fixed set of
// names per algorithm.
func (m metrics) ppoLosses(st ppo.Stats) {
	m.Loss("policy", st.PolicyLoss)
	m.Loss("value", st.ValueLoss)
	m.Loss("entropy", st.Entropy)
	m.Loss("approx_kl", st.ApproxKL)
}

func (m metrics) dqnLosses(st dqn.Stats) {
	m.Loss("loss", st.Loss)
	m.Loss("td", st.MeanTD)
	m.Loss("mean_q", st.MeanQ)
}

// Stats reports the trainer's figures. The worker base adds samples (agent
// steps received, stale ones included) and samples_per_s (the same per
// second of uptime); train_samples_per_s is the rate at which steps go
// into updates over the last 20 updates. The loss terms are those of the
// last update, absent before the first; mean_return is over the last 20
// episodes seen in batches, absent before the first.
func (w *ppoTrainer) Stats() map[string]any {
	s := &w.st
	out := map[string]any{
		"policy":              w.set.cfg.Policy,
		"device":              cmp.Or(w.set.cfg.Device, worker.DeviceCPU),
		member.StatVersion:    w.version,
		"updates":             s.updates,
		"samples_trained":     s.trained,
		"train_samples_per_s": s.rate.perSecond(time.Now()),
		"buffer_steps":        w.bufLen,
		member.StatEpisodes:   s.episodes,
		"dropped_stale":       s.droppedStale,
		"dropped_future":      s.droppedFuture,
		"dropped_steps":       s.droppedSteps,
		"rejected":            s.rejected,
		"update_failures":     s.updateFailures,
		"checkpoints":         s.checkpoints,
		"checkpoint_failures": s.ckptFailures,
		"checkpoint_version":  w.ckptVer,
		"resumed_from":        w.resumed,
		"max_staleness":       w.set.staleness,
		"overlap":             w.set.overlap,
		"updating":            w.updating(),
		"agents":              s.agents.list(),
	}
	w.keeper.stats(out)
	if s.returns.count > 0 {
		out[member.StatMeanReturn] = s.returns.mean()
	}
	if lags := s.lags.values(); len(lags) > 0 {
		out[member.StatPolicyLag] = s.lags.mean()
		out["policy_lag_p50"] = percentile(lags, 50)
		out["policy_lag_p99"] = percentile(lags, 99)
	}
	if s.hasLast {
		l := s.last
		for k, v := range map[string]float64{
			"policy_loss": l.PolicyLoss, "value_loss": l.ValueLoss, "entropy": l.Entropy,
			"approx_kl": l.ApproxKL, "clip_frac": l.ClipFrac, "explained_variance": l.ExplainedVariance,
			"grad_norm": l.GradNorm, "lr": l.LR,
		} {
			// NaN (explained variance of constant returns) has no JSON
			// form, and rlctl prints stats as JSON: leave it out.
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				out[k] = v
			}
		}
		out["update_ms"] = float64(s.lastUpdate.Microseconds()) / 1e3
		out["update_samples"] = l.Samples
	}
	if w.pub != nil {
		ps := w.pub.Stats()
		out["published"] = ps.Published
		out["published_version"] = ps.Version
		out["fetches_served"] = ps.Served
	}
	if w.cons != nil {
		out["malformed"] = w.cons.Stats().Malformed
	}
	w.grp.stats(out)
	return out
}
