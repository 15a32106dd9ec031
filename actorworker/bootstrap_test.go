package actorworker

import (
	"maps"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/distrl/distrl/rpc"
)

func TestBatchEndAfter(t *testing.T) {
	const steps = 5
	cases := []struct {
		name        string
		term, trunc bool
		length      int
		span        bool // span_episodes
		want        batchEnd
	}{
		{"mid-episode, batch not full", false, false, 3, false, keepFilling},
		{"mid-episode, batch full: cut, bootstrap from the next value", false, false, steps, false, awaitBootstrap},
		{"past full (never happens, still cut)", false, false, steps + 1, false, awaitBootstrap},
		{"terminated: send with bootstrap 0", true, false, 3, false, sendNow},
		{"terminated on a full batch: still 0", true, false, steps, false, sendNow},
		{"truncated: bootstrap from the final observation", false, true, 3, false, awaitBootstrap},
		{"truncated on a full batch", false, true, steps, false, awaitBootstrap},
		{"terminated and truncated: termination wins", true, true, 1, false, sendNow},
		{"spanning: terminated, the next episode goes on in the batch", true, false, 3, true, keepFilling},
		{"spanning: terminated on a full batch, bootstrap 0", true, false, steps, true, sendNow},
		{"spanning: terminated and truncated", true, true, 1, true, keepFilling},
		{"spanning: truncated", false, true, 3, true, awaitBootstrap},
		{"spanning: mid-episode, batch full", false, false, steps, true, awaitBootstrap},
		{"spanning: mid-episode, not full", false, false, 3, true, keepFilling},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := batchEndAfter(c.term, c.trunc, c.length, steps, c.span); got != c.want {
				t.Errorf("batchEndAfter(term=%v, trunc=%v, len=%d, %d, span=%v) = %v, want %v",
					c.term, c.trunc, c.length, steps, c.span, got, c.want)
			}
		})
	}
}

// TestVersionCutsOfRoutes: batches to a sample stream are cut at a newer
// policy version unless version_cuts is false; batches to a replay never.
func TestVersionCutsOfRoutes(t *testing.T) {
	spread := map[string]any{"env": "simple_spread", "env_config": map[string]any{"n_agents": 2}}
	withSpread := func(kv map[string]any) map[string]any {
		maps.Copy(kv, spread)
		return kv
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want []bool // per route
	}{
		{"default", map[string]any{}, []bool{true}},
		{"off", map[string]any{"version_cuts": false}, []bool{false}},
		{"on", map[string]any{"version_cuts": true}, []bool{true}},
		{"replay", map[string]any{"replay_stream": "r"}, []bool{false}},
		{"replay, on", map[string]any{"replay_stream": "r", "version_cuts": true}, []bool{false}},
		{"agents: sample and replay", withSpread(map[string]any{"agents": []any{
			map[string]any{"indices": []any{0}, "policy": "a"},
			map[string]any{"indices": []any{1}, "policy": "b", "replay_stream": "r"},
		}}), []bool{true, false}},
		{"agents, off", withSpread(map[string]any{"version_cuts": false, "agents": []any{
			map[string]any{"match": ".*", "policy": "a"},
		}}), []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := msgpack.Marshal(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := parseConfig(rpc.RawArgs(raw), 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []bool
			for _, r := range cfg.routes {
				got = append(got, r.versionCuts)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("routes cut at versions %v, want %v", got, tc.want)
			}
		})
	}
}
