package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/worker/member"
)

// Metrics is one line of metrics.jsonl: the trial at one moment.
type Metrics struct {
	Time time.Time `json:"time"`
	// ElapsedS counts from the moment every worker was running.
	ElapsedS float64 `json:"elapsed_s"`
	// EnvSteps and Episodes are the actors' totals, including those of
	// processes that were restarted since.
	EnvSteps int64 `json:"env_steps"`
	Episodes int64 `json:"episodes"`
	// StepsPerS is the env step rate since the previous line (that
	// line's rate when it is less than minRateWindow old).
	StepsPerS float64 `json:"steps_per_s"`
	// MeanReturn is the trainer's if it reports one, else the actors'
	// mean over their last (up to 20) episodes, weighted by how many each
	// holds; absent before the first episode ends.
	MeanReturn *float64 `json:"mean_return,omitempty"`
	// ReturnEpisodes is how many episodes MeanReturn covers.
	ReturnEpisodes int64 `json:"return_episodes,omitempty"`
	// Version is the trainer's parameter version, else the newest a policy
	// worker serves; PolicyLag is the trainer's staleness figure.
	Version   *int64   `json:"version,omitempty"`
	PolicyLag *float64 `json:"policy_lag,omitempty"`
	// DroppedShare is the share of the steps PPO trainers took in that
	// they dropped (stale, or of a version they never made): dropped over
	// dropped, trained and buffered, summed over the trainers since each
	// process started; absent without a trainer that drops.
	DroppedShare *float64 `json:"dropped_share,omitempty"`
	// ReplaySize is the items held by the replay workers (summed), and
	// SamplesPerInsert their samples over their inserts; absent without
	// replay workers.
	ReplaySize       *int64   `json:"replay_size,omitempty"`
	SamplesPerInsert *float64 `json:"samples_per_insert,omitempty"`
	// BestReturn is the best mean return an evaluator measured of a kept
	// version, BestVersion that version; absent without evaluations.
	BestReturn  *float64 `json:"best_return,omitempty"`
	BestVersion *int64   `json:"best_version,omitempty"`
	Restarts    int      `json:"restarts"`
	// Workers maps each worker to its state and key statistics.
	Workers map[string]map[string]any `json:"workers"`
}

// keyStats are the statistics of each worker type worth a line in
// metrics.jsonl; a type not listed keeps every numeric statistic.
var keyStats = map[string][]string{
	member.TypeActor: {member.StatEnvSteps, member.StatEpisodes, member.StatMeanReturn, "steps_per_s",
		"inference_failures", "backpressure", "backpressured_pct", "inference_wait_pct", "version_last"},
	member.TypePolicy: {member.StatVersion, "batches", "rows", "mean_batch", "rows_per_s", "infer_ms_p50"},
	member.TypeSink:   {"batches", "steps", member.StatEpisodes, "mean_episode_return"},
	member.TypeTrainer: {member.StatVersion, "updates", "samples_trained", "train_samples_per_s", "buffer_steps",
		member.StatEpisodes, member.StatMeanReturn, member.StatPolicyLag, "policy_loss", "value_loss", "entropy",
		"approx_kl", "dropped_stale", "dropped_steps", "checkpoints", "loss", "mean_q", "priorities_sent", "sample_errors",
		"group_reforms", "group_syncs", "update_s", "loop_s", "learner_busy_pct", "loop_busy_pct"},
	member.TypeEcho: {"echoes"},
	member.TypeReplay: {"size", "inserts", "samples", "inserts_per_s", "samples_per_s", "samples_per_insert",
		"evictions", "priority_updates", "limiter_waits", "limiter_timeouts"},
	member.TypeEval: {"evaluated", "pending", "evaluating", member.StatEvalVersion, member.StatEvalReturn, "eval_stderr",
		"eval_win_rate", member.StatBestVersion, member.StatBestReturn, "best_stderr", "best_win_rate"},
}

// KeyStats picks the statistics of a worker of type typ worth showing.
func KeyStats(typ string, stats map[string]any) map[string]any {
	out := map[string]any{}
	keys, ok := keyStats[typ]
	if !ok {
		keys = slices.Sorted(maps.Keys(stats))
	}
	for _, k := range keys {
		if v, ok := stats[k]; ok {
			if _, num := Number(v); num {
				out[k] = v
			}
		}
	}
	// An actor's info_* statistics are the numeric info values of its
	// environments (actorworker.InfoStatPrefix): the user's own metrics.
	for k, v := range stats {
		if _, num := Number(v); num && strings.HasPrefix(k, "info_") {
			out[k] = v
		}
	}
	return out
}

// FormatStats renders key statistics as "k=v k=v", sorted, for tables.
func FormatStats(stats map[string]any) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		f, _ := Number(stats[k])
		if f == float64(int64(f)) {
			fmt.Fprintf(&b, "%s=%d", k, int64(f))
		} else {
			fmt.Fprintf(&b, "%s=%.3g", k, f)
		}
	}
	return b.String()
}

// Number converts any numeric value msgpack may decode (a stats reply's)
// to a float64.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// minRateWindow is the shortest interval a steps/s figure is computed over.
const minRateWindow = 250 * time.Millisecond

// sample is what the controller knows of one worker at a metrics poll.
type sample struct {
	name  string
	typ   string
	state string
	stats map[string]any // nil when the stats request failed
	// base holds the cumulative counters of the worker's earlier processes.
	base counters
}

// counters are the figures that restart at zero with a new process.
type counters struct{ envSteps, episodes int64 }

func (s sample) counters() counters {
	st, _ := Number(s.stats[member.StatEnvSteps])
	ep, _ := Number(s.stats[member.StatEpisodes])
	return counters{envSteps: int64(st), episodes: int64(ep)}
}

// aggregate builds one metrics line from the workers' samples; prev is the
// line before (nil for the first).
func aggregate(now time.Time, elapsed time.Duration, samples []sample, prev *Metrics, restarts int) *Metrics {
	m := &Metrics{Time: now, ElapsedS: elapsed.Seconds(), Restarts: restarts, Workers: make(map[string]map[string]any, len(samples))}
	var retSum, retWeight float64
	// Trainers: a policy's data-parallel group is one learner whose
	// members each see their share of the episodes, so returns are
	// weighed by the episodes behind them and lags averaged.
	var trainerRet, trainerWeight, lagSum float64
	lags := 0
	var dropped, intake float64 // PPO trainers' steps dropped, and taken in
	var trainerVersion, policyVersion *int64
	var replaySize, replayInserts, replaySamples float64
	replays := 0
	for _, s := range samples {
		w := KeyStats(s.typ, s.stats)
		w["state"] = s.state
		m.Workers[s.name] = w
		switch s.typ {
		case member.TypeActor:
			c := s.counters()
			m.EnvSteps += s.base.envSteps + c.envSteps
			m.Episodes += s.base.episodes + c.episodes
			if r, ok := Number(s.stats[member.StatMeanReturn]); ok && c.episodes > 0 {
				weight := float64(min(c.episodes, member.ReturnWindow))
				retSum += r * weight
				retWeight += weight
			}
		case member.TypeTrainer:
			if r, ok := Number(s.stats[member.StatMeanReturn]); ok {
				weight := float64(member.ReturnWindow) // if the trainer does not say
				if e, ok := Number(s.stats[member.StatEpisodes]); ok {
					weight = min(e, member.ReturnWindow)
				}
				trainerRet += r * weight
				trainerWeight += weight
			}
			if l, ok := Number(s.stats[member.StatPolicyLag]); ok {
				lagSum += l
				lags++
			}
			if d, ok := Number(s.stats["dropped_steps"]); ok {
				trained, _ := Number(s.stats["samples_trained"])
				buffered, _ := Number(s.stats["buffer_steps"])
				dropped, intake = dropped+d, intake+d+trained+buffered
			}
			if v, ok := Number(s.stats[member.StatVersion]); ok && (trainerVersion == nil || int64(v) > *trainerVersion) {
				vi := int64(v)
				trainerVersion = &vi
			}
		case member.TypeReplay:
			size, ok1 := Number(s.stats["size"])
			ins, ok2 := Number(s.stats["inserts"])
			smp, ok3 := Number(s.stats["samples"])
			if ok1 && ok2 && ok3 {
				replays++
				replaySize, replayInserts, replaySamples = replaySize+size, replayInserts+ins, replaySamples+smp
			}
		case member.TypePolicy:
			if v, ok := Number(s.stats[member.StatVersion]); ok && (policyVersion == nil || int64(v) > *policyVersion) {
				vi := int64(v)
				policyVersion = &vi
			}
		case member.TypeEval:
			// The trial's best is what an evaluator that tags the best
			// says: one against a weak opponent (best_tag "") may score
			// higher and name another version.
			r, ok1 := Number(s.stats[member.StatBestReturn])
			v, ok2 := Number(s.stats[member.StatBestVersion])
			if tag, _ := s.stats["best_tag"].(string); ok1 && ok2 && tag != "" && (m.BestReturn == nil || r > *m.BestReturn) {
				vi := int64(v)
				m.BestReturn, m.BestVersion = &r, &vi
			}
		}
	}
	switch {
	case trainerWeight > 0:
		r := trainerRet / trainerWeight
		m.MeanReturn = &r
		m.ReturnEpisodes = int64(trainerWeight)
	case retWeight > 0:
		r := retSum / retWeight
		m.MeanReturn = &r
		m.ReturnEpisodes = int64(retWeight)
	}
	m.Version = trainerVersion
	if m.Version == nil {
		m.Version = policyVersion
	}
	if lags > 0 {
		l := lagSum / float64(lags)
		m.PolicyLag = &l
	}
	if intake > 0 {
		share := dropped / intake
		m.DroppedShare = &share
	}
	if replays > 0 {
		size := int64(replaySize)
		m.ReplaySize = &size
		if replayInserts > 0 {
			r := replaySamples / replayInserts
			m.SamplesPerInsert = &r
		}
	}
	if prev != nil {
		switch dt := now.Sub(prev.Time); {
		case dt >= minRateWindow:
			m.StepsPerS = max(float64(m.EnvSteps-prev.EnvSteps), 0) / dt.Seconds()
		default:
			// A line right after the previous one (the last, at a stop)
			// would divide a few steps by a few milliseconds.
			m.StepsPerS = prev.StepsPerS
		}
	} else if elapsed > 0 {
		m.StepsPerS = float64(m.EnvSteps) / elapsed.Seconds()
	}
	return m
}
