// Package actorworker is the "actor" worker type: it steps environments,
// asks a policy for actions and sends the resulting trajectories to a
// trainer as api.SampleBatches.
//
// # Structure
//
// An [Agent] is one agent of one environment: its pending inference request,
// the observation that request is for, and its [api.SampleBuilder] (the
// batch being filled). An [EnvTarget] is one [api.Env] with its agents; it
// steps only when every agent's action has arrived. An [EnvRing] holds
// several targets and the worker steps whichever is ready, in turn, so that
// simulation continues while replies for the other environments are still
// outstanding: with remote inference, a ring of two or more hides the
// round trip to the policy worker behind the stepping of the other
// environments (the design of SRL's actor worker).
//
// Each poll of the worker takes in the replies that have arrived and steps
// the ready targets a slot at a time (up to max_poll_steps visits): with
// remote inference the ring is ring_slots slots of consecutive targets,
// and the requests a slot posts are flushed as one message before the next
// slot steps, so that one half of the ring steps while the other waits for
// its actions (Sample Factory's double-buffered sampling) and several
// requests are in flight. That pays only when stepping half the ring takes
// about as long as a round trip to the policy worker; for cheaper rings it
// doubles the messages and hides little. Unless ring_slots is set, the
// actor therefore times its turns and steps the ring as 2 slots while the
// whole ring takes AutoRingTime or more, else as 1. A slot that steps nothing ends the poll;
// the worker then sleeps on the inference socket until a reply arrives.
// An actor whose policy workers are on other nodes grows its ring while it
// waits for actions (grow.go, ring_max): the round trip is the network's,
// and a ring sized for one node would step a few environments per round
// trip.
// Inline inference has one slot, the whole ring, and its results are
// ready as soon as Flush returns, so an inline actor goes round again until
// its max_poll_steps are used.
//
// The ring's environments are one [api.EnvBatch] (api.NewEnvBatch with
// ring_size). A turn prepares every ready target (takes its results, says
// whether it needs a step or a reset), runs all those calls in one
// EnvBatch.Run, and completes each target with its result; episodes that
// terminated in it are reset by a second Run at once. Go environments run
// the calls one by one (api.SerialBatch); a Python host (package pyenv)
// gets one message per turn instead of one per environment.
//
// # Samples and bootstrap values
//
// An agent's steps are cut into a batch every sample_steps steps and at
// the end of every episode. With span_episodes an episode that terminates
// does not end the batch: the next episode's steps follow in it
// (Terminated marks where returns stop) and batches end every sample_steps
// steps and at truncations, so an actor of short episodes sends a batch
// per sample_steps steps, not one per episode (for CartPole's untrained
// 22-step episodes, a ninth of the batches). Agents that play a pool
// (versions drawn per episode) cut at every episode's end regardless, so
// that one version plays each of their batches. A learner estimating
// returns (GAE) needs the value of the observation that follows the last
// step of a batch; the rules are in one place (batchEndAfter in
// bootstrap.go):
//
//   - the last step terminated (with span_episodes: and the batch is
//     full): the batch is sent at once with a bootstrap value of 0 (the
//     episode is over; there is nothing to bootstrap);
//   - the last step was truncated (a time limit): the final observation is
//     posted for one more inference, whose value becomes the bootstrap
//     value and whose action is ignored; then the environment is reset;
//   - the batch was cut mid-episode: the batch waits for the next inference
//     result, which carries the value of the next observation, and is sent
//     when that result is consumed, before the next step is recorded;
//   - (version_cuts, the default for a sample stream) the next result
//     comes from a newer policy version than every step of the batch: the
//     batch ends there, its bootstrap value that result's, as for a cut
//     mid-episode. A batch then holds one version, which an on-policy
//     trainer keeps or drops whole by max_staleness (a batch mixing
//     versions went with its oldest). Newer than every step, not only
//     different: results of policy workers a version apart, taking turns,
//     cut once. Batches to a replay are never cut so.
//
// In a multi-agent environment the episode ends for all agents when it
// ends for any (api.Env's contract); an agent the environment did not flag
// is then recorded as truncated, since its episode was cut short.
//
// # Back-pressure
//
// A sample producer that answers stream.ErrBackpressure has not sent the
// batch; the agent keeps it and the actor retries at every poll. While an
// agent of a target holds an unsent batch, that target does not step, so an
// actor whose trainer falls behind stops simulating instead of buffering
// without bound. The bound is short: sample_queue messages per consumer
// (DefaultSampleQueue, 1) wait in the actor, because what waits for an
// on-policy trainer ages with each of its updates and is dropped once it
// is more than max_staleness versions old.
//
// # Seeds
//
// Episode e of target t of an actor configured with seed s resets its
// environment with s*1000003 + t*7919 + e ([EnvSeed]); the default seed is
// the worker's index. Runs with equal configuration and equal policy
// answers are therefore reproducible step for step.
//
// # Agents and policies
//
// Without the agents key every agent acts for one policy. With it (a list
// of [AgentMapping]s) each mapping takes the agents it matches, by a
// regexp of the whole agent id or by their positions in the environment's
// agent list, the first mapping that matches an agent taking it, to a
// policy with its own inference client, sample stream or replay, batch
// length, epsilon and inference mode; every agent must be taken, and every
// mapping must take one, or the configuration is refused before anything
// starts (CheckConfig). One policy is the one-mapping case of the same
// code: a route per mapping, one inference client per policy, shared by
// its mappings so that its agents' requests travel together, and one
// producer per stream. The worker polls, flushes, waits on and closes all
// of them; a target steps once every agent has its action, whichever
// policy answers it, so several remote policies are waited for together
// and the ring grows (ring_max unset) only while every policy is remote
// and reached over the network.
//
// # Statistics
//
// The "stats" reply adds env_steps (calls of Env.Step), agent_steps
// (env_steps times the number of agents; PollResult.Samples counts these),
// episodes, mean_return and mean_length (over the last 20 episodes, as
// the first agent of each environment saw them: for a shared-reward
// environment such as simple_spread that is every agent's return),
// batches_sent, steps_per_s (environment steps per second since the first
// poll), inference_failures, backpressure (batches refused and kept),
// ring_size, version_last (the newest policy version among the results
// taken) and, with remote inference, inference_messages and
// inference_bytes (request messages sent and their bytes), over all its
// policies. With several policies it adds policies: per policy,
// agent_steps, batches_sent, episodes and mean_return (the mean over its
// agents of their returns, over its last 20 episodes).
//
// # Configuration
//
// The "configure" command takes [Config]. Inference is either "remote" (a
// policy worker serving the configured policy, found through name resolve)
// or "inline" (a policy.ActorCritic run in the actor itself, built from
// policy.ConfigForEnv with the configured seed). Samples go to the sample
// stream sample_stream; "null" discards them, for benchmarks.
package actorworker
