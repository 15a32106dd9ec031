package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row pairs a measured figure with its limit (none: limit is ""). Keys are "pkg.Benchmark metric",
// pkg being the last element of the import path. A limit "bar N" is a fixed
// one in the measured figure's unit: an issue's target, not a measurement.
type row struct {
	title    string
	measured string
	limit    string
	// higherIsBetter: the ratio is measured/limit for throughputs and
	// limit/measured for times, so 1.0 always means "as fast as the limit".
	higherIsBetter bool
}

var rows = slices.Concat([]row{
	// The panel names its workers in an embedded etcd, as users run it; the
	// in-memory name resolve of unit tests is the second row.
	{"control-panel request, etcd, vs raw REQ/REP (round trips/s)", "panel.BenchmarkPanelRequest/etcd ops/s", "rpc.BenchmarkRawREQREP req/s", true},
	{"control-panel request, in-memory name resolve, vs raw REQ/REP (round trips/s)", "panel.BenchmarkPanelRequest/memory ops/s", "rpc.BenchmarkRawREQREP req/s", true},
	{"rpc client request vs raw REQ/REP (round trips/s)", "rpc.BenchmarkClientRequest req/s", "rpc.BenchmarkRawREQREP req/s", true},
	{"shared-memory channel round trip (doorbells) vs raw REQ/REP (round trips/s)", "shm.BenchmarkChannelRoundTrip req/s", "rpc.BenchmarkRawREQREP req/s", true},
	{"rpc Do, 64 in flight vs raw DEALER/ROUTER pipelined (req/s)", "rpc.BenchmarkDo64 req/s", "rpc.BenchmarkRawDealerRouterPipelined req/s", true},
	{"group request to 64 workers vs 64 sequential (median ms)", "panel.BenchmarkGroupRequest/64 p50-ms", "panel.BenchmarkSequentialRequests/64 p50-ms", false},
	{"group request to 256 workers vs 256 sequential (median ms)", "panel.BenchmarkGroupRequest/256 p50-ms", "panel.BenchmarkSequentialRequests/256 p50-ms", false},
	{"group request to 64 workers in one host process vs raw pipelined DEALER/ROUTER (req/s)", "e2e.BenchmarkGroupRequestHosted/workers=64 req/s", "rpc.BenchmarkRawDealerRouterPipelined req/s", true},
	{"group request to 64 workers in one host process (median ms)", "e2e.BenchmarkGroupRequestHosted/workers=64 p50-ms", "", false},
	{"group request to 256 workers in one host process vs raw pipelined DEALER/ROUTER (req/s)", "e2e.BenchmarkGroupRequestHosted/workers=256 req/s", "rpc.BenchmarkRawDealerRouterPipelined req/s", true},
	{"group request to 256 workers in one host process (median ms)", "e2e.BenchmarkGroupRequestHosted/workers=256 p50-ms", "", false},
	{"group request to 1024 workers in one host process vs raw pipelined DEALER/ROUTER (req/s)", "e2e.BenchmarkGroupRequestHosted/workers=1024 req/s", "rpc.BenchmarkRawDealerRouterPipelined req/s", true},
	{"group request to 1024 workers in one host process (median ms)", "e2e.BenchmarkGroupRequestHosted/workers=1024 p50-ms", "", false},
	{"group request to 4096 workers in one host process vs raw pipelined DEALER/ROUTER (req/s)", "e2e.BenchmarkGroupRequestHosted/workers=4096 req/s", "rpc.BenchmarkRawDealerRouterPipelined req/s", true},
	{"group request to 4096 workers in one host process (median ms)", "e2e.BenchmarkGroupRequestHosted/workers=4096 p50-ms", "", false},
	{"name resolve add, embedded etcd (median)", "etcd.BenchmarkEtcdAdd p50-us", "", false},
	{"name resolve get, embedded etcd (median)", "etcd.BenchmarkEtcdGet p50-us", "", false},
	{"name resolve wait for a key added later (median)", "etcd.BenchmarkEtcdWait/added p50-us", "", false},
	// What a group request pays to resolve its workers: a listing before, a mirror's Sync now.
	{"resolve 64 workers: mirror sync vs listing (median us)", "etcd.BenchmarkEtcdResolveAll/mirror-sync/records=64 p50-us", "etcd.BenchmarkEtcdResolveAll/find/records=64 p50-us", false},
	{"resolve 4096 workers: mirror sync vs listing (median us)", "etcd.BenchmarkEtcdResolveAll/mirror-sync/records=4096 p50-us", "etcd.BenchmarkEtcdResolveAll/find/records=4096 p50-us", false},

	// Data plane, end to end (package e2e): environment steps/s of actor
	// processes stepping CartPole-v1 with a policy worker process answering
	// their inference and a sink process taking their samples, against
	// BenchmarkSingleLoopLimit: the same environments and network stepped by
	// one loop in one process, with no network. The processes share both
	// cores of the machine, the loop has one, so above 1.00x is possible.
	{"pipeline, 1 actor, ring=1 vs one loop of 1 env (env steps/s)", "e2e.BenchmarkPipeline/ring=1 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=1 steps/s", true},
	{"pipeline, 1 actor, ring=2 vs one loop of 2 envs (env steps/s)", "e2e.BenchmarkPipeline/ring=2 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=2 steps/s", true},
	{"pipeline, 1 actor, ring=8 vs one loop of 8 envs (env steps/s)", "e2e.BenchmarkPipeline/ring=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=8 steps/s", true},
	// N actors of ring 8 are held against one loop of all their N*8
	// environments, which runs them through the policy as one batch of N*8:
	// the same work, with the largest batch the policy worker could get if
	// every actor's request arrived together. Against ring=8 the limit would
	// forgo the batching that more actors make possible, and a pipeline could
	// pass it by batching alone rather than by using the second core.
	{"pipeline, 1 actor x 8 envs vs one loop of 8 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=1/envs=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=8 steps/s", true},
	{"pipeline, 1 actor x 64 envs vs one loop of 64 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=1/envs=64 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=64 steps/s", true},
	{"pipeline, 1 actor x 256 envs vs one loop of 256 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=1/envs=256 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=256 steps/s", true},
	{"pipeline, 2 actors x 8 envs vs one loop of 16 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=2/envs=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=16 steps/s", true},
	{"pipeline, 2 actors x 64 envs vs one loop of 128 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=2/envs=64 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=128 steps/s", true},
	{"pipeline, 2 actors x 256 envs vs one loop of 512 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=2/envs=256 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=512 steps/s", true},
	{"pipeline, 4 actors x 8 envs vs one loop of 32 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=4/envs=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=32 steps/s", true},
	{"pipeline, 4 actors x 64 envs vs one loop of 256 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=4/envs=64 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=256 steps/s", true},
	{"pipeline, 4 actors x 256 envs vs one loop of 1024 envs (env steps/s)", "e2e.BenchmarkPipelineActors/actors=4/envs=256 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=1024 steps/s", true},
	// The same pipelines with a policy worker in each actor's process
	// (colocate, as cartpole-sink runs them), against the same single
	// loops, and against policy workers of their own.
	{"pipeline, 1 actor x 8 envs, colocated policy worker vs one loop of 8 envs (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=1/envs=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=8 steps/s", true},
	{"pipeline, 2 actors x 8 envs, colocated policy workers vs one loop of 16 envs (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=16 steps/s", true},
	{"pipeline, 4 actors x 8 envs, colocated policy workers vs one loop of 32 envs (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=4/envs=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=32 steps/s", true},
	{"pipeline, 2 actors x 64 envs, colocated policy workers vs one loop of 128 envs (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=64 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=128 steps/s", true},
	{"pipeline, 2 actors x 256 envs, colocated policy workers vs one loop of 512 envs (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=256 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=512 steps/s", true},
	{"pipeline 2x8 colocated: requests in process vs through a shared-memory ring (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=8 steps/s", "e2e.BenchmarkPipelineColocated/actors=2/envs=8/ring steps/s", true},
	{"pipeline 2x64 colocated: requests in process vs through a shared-memory ring (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=64 steps/s", "e2e.BenchmarkPipelineColocated/actors=2/envs=64/ring steps/s", true},
	{"pipeline 2x8 colocated: batches spanning episodes vs cut at every episode end (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=8 steps/s", "e2e.BenchmarkPipelineColocated/actors=2/envs=8/episodes steps/s", true},
	{"pipeline 2x64 colocated: batches spanning episodes vs cut at every episode end (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=64 steps/s", "e2e.BenchmarkPipelineColocated/actors=2/envs=64/episodes steps/s", true},
	{"pipeline 2x64 colocated, sink CPU us per env step: spanning vs cut at episode ends", "e2e.BenchmarkPipelineColocated/actors=2/envs=64 sink-cpu-us/step", "e2e.BenchmarkPipelineColocated/actors=2/envs=64/episodes sink-cpu-us/step", false},
	{"pipeline 2x8: colocated policy workers vs policy worker of its own (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=8 steps/s", "e2e.BenchmarkPipelineActors/actors=2/envs=8 steps/s", true},
	{"pipeline 2x64: colocated policy workers vs policy worker of its own (env steps/s)", "e2e.BenchmarkPipelineColocated/actors=2/envs=64 steps/s", "e2e.BenchmarkPipelineActors/actors=2/envs=64 steps/s", true},
	{"pipeline 2x8, CPU us per env step: colocated vs policy worker of its own", "e2e.BenchmarkPipelineColocated/actors=2/envs=8 cpu-us/step", "e2e.BenchmarkPipelineActors/actors=2/envs=8 cpu-us/step", false},
	// What a hand-off costs this machine, which bounds the pipelines of few
	// environments per actor: two loops on one CPU yielding to each other,
	// as processes (an actor and its policy worker) against as threads of
	// one process, and a yield with nobody to switch to.
	{"hand-off between two processes vs two threads on one CPU (ns per switch)", "worker.BenchmarkHandOff/processes ns/switch", "worker.BenchmarkHandOff/threads ns/switch", false},
	{"a yield with nobody to switch to (ns, the system call alone)", "worker.BenchmarkHandOff/alone ns/switch", "", false},
}, pipelineBreakdown(), scaleRows(), kernelRows(), gpuRows(), []row{
	// Transport: the same pipeline with inference over shared memory (the
	// default between processes of one node), over ipc:// and over tcp on
	// the loopback.
	{"pipeline 2x64, inference over shared memory vs ipc (env steps/s)", "e2e.BenchmarkPipelineTransport/shm steps/s", "e2e.BenchmarkPipelineTransport/ipc steps/s", true},
	{"pipeline 2x64, CPU us per env step: shared memory vs ipc", "e2e.BenchmarkPipelineTransport/shm cpu-us/step", "e2e.BenchmarkPipelineTransport/ipc cpu-us/step", true},
	{"pipeline 2x64 over ipc vs over tcp (env steps/s)", "e2e.BenchmarkPipelineTransport/ipc steps/s", "e2e.BenchmarkPipelineTransport/tcp steps/s", true},
	// One client and one server in one goroutine: the transports' latency
	// without environments or a network.
	{"inference round trip of 1 row: shared memory vs ZMQ over tcp (rows/s)", "stream.BenchmarkInferenceRoundTrip/shm/rows=1 rows/s", "stream.BenchmarkInferenceRoundTrip/zmq/rows=1 rows/s", true},
	{"inference round trip of 128 rows: shared memory vs ZMQ over tcp (rows/s)", "stream.BenchmarkInferenceRoundTrip/shm/rows=128 rows/s", "stream.BenchmarkInferenceRoundTrip/zmq/rows=128 rows/s", true},
	{"inference round trip of 1 row: in process vs shared memory (rows/s)", "stream.BenchmarkInferenceRoundTrip/inprocess/rows=1 rows/s", "stream.BenchmarkInferenceRoundTrip/shm/rows=1 rows/s", true},
	{"inference round trip of 16 rows: in process vs shared memory (rows/s)", "stream.BenchmarkInferenceRoundTrip/inprocess/rows=16 rows/s", "stream.BenchmarkInferenceRoundTrip/shm/rows=16 rows/s", true},
	{"inference round trip of 128 rows: in process vs shared memory (rows/s)", "stream.BenchmarkInferenceRoundTrip/inprocess/rows=128 rows/s", "stream.BenchmarkInferenceRoundTrip/shm/rows=128 rows/s", true},
	// Double-buffered sampling: the ring stepped as 2 or 4 slots, each its
	// own request, against 1 slot (step everything, then wait).
	{"pipeline 2x64, ring_slots=2 vs 1 (env steps/s)", "e2e.BenchmarkPipelineSlots/slots=2 steps/s", "e2e.BenchmarkPipelineSlots/slots=1 steps/s", true},
	{"pipeline 2x64, ring_slots=4 vs 1 (env steps/s)", "e2e.BenchmarkPipelineSlots/slots=4 steps/s", "e2e.BenchmarkPipelineSlots/slots=1 steps/s", true},
	// Speed-ups of the ring: the "limit" is the same pipeline with one
	// environment per actor. SRL reports 8.3x on Pong from its ring.
	{"ring speed-up: pipeline ring=8 vs ring=1 (SRL: 8.3x on Pong)", "e2e.BenchmarkPipeline/ring=8 steps/s", "e2e.BenchmarkPipeline/ring=1 steps/s", true},
	{"ring speed-up: pipeline ring=2 vs ring=1", "e2e.BenchmarkPipeline/ring=2 steps/s", "e2e.BenchmarkPipeline/ring=1 steps/s", true},
	{"pipeline ring=8 vs actor with inline policy ring=8 (env steps/s)", "e2e.BenchmarkPipeline/ring=8 steps/s", "actorworker.BenchmarkActorInline/ring=8 steps/s", true},
	{"actor, inline policy, ring=8 vs one loop of 8 envs (env steps/s)", "actorworker.BenchmarkActorInline/ring=8 steps/s", "e2e.BenchmarkSingleLoopLimit/ring=8 steps/s", true},
	{"policy worker, batch=1 vs Infer alone (rows/s)", "policyworker.BenchmarkPolicyWorker/batch=1 rows/s", "policyworker.BenchmarkPolicyInfer/batch=1 rows/s", true},
	{"policy worker, batch=64 vs Infer alone (rows/s)", "policyworker.BenchmarkPolicyWorker/batch=64 rows/s", "policyworker.BenchmarkPolicyInfer/batch=64 rows/s", true},
	{"policy worker, batch=512 vs Infer alone (rows/s)", "policyworker.BenchmarkPolicyWorker/batch=512 rows/s", "policyworker.BenchmarkPolicyInfer/batch=512 rows/s", true},
	{"policy worker, batch=512, threads=2 vs threads=1 (rows/s)", "policyworker.BenchmarkPolicyWorker/threads=2/batch=512 rows/s", "policyworker.BenchmarkPolicyWorker/batch=512 rows/s", true},
	{"policy worker, batch=4096, threads=2 vs Infer alone, threads=2 (rows/s)", "policyworker.BenchmarkPolicyWorker/threads=2/batch=4096 rows/s", "policyworker.BenchmarkPolicyInfer/threads=2/batch=4096 rows/s", true},
	{"Infer alone, batch=4096, threads=2 vs batch=512, threads=1 (rows/s)", "policyworker.BenchmarkPolicyInfer/threads=2/batch=4096 rows/s", "policyworker.BenchmarkPolicyInfer/batch=512 rows/s", true},
	{"policy worker, batch=1: CPU ns per row, client and worker", "policyworker.BenchmarkPolicyWorker/batch=1 cpu-ns/row", "", false},
	{"policy worker, batch=8: CPU ns per row, client and worker", "policyworker.BenchmarkPolicyWorker/batch=8 cpu-ns/row", "", false},
	{"policy worker, batch=64: CPU ns per row, client and worker", "policyworker.BenchmarkPolicyWorker/batch=64 cpu-ns/row", "", false},
	{"policy worker, batch=512: CPU ns per row, client and worker", "policyworker.BenchmarkPolicyWorker/batch=512 cpu-ns/row", "", false},
	{"sample stream, 64 KiB batches vs raw PUSH/PULL (MB/s)", "stream.BenchmarkSampleStream64KiB MB/s", "stream.BenchmarkRawPushPull64KiB MB/s", true},
	// Python environments (package pyenv): the Python CartPole of
	// distrl.examples stepped through the bridge (one message per batch)
	// against the same environment in a plain Python loop of the same run,
	// the limit of any bridge; and both against the built-in Go CartPole.
	{"Python CartPole via bridge, batch=1 vs plain Python loop (env steps/s)", "pyenv.BenchmarkPythonCartPole/batch=1 steps/s", "pyenv.BenchmarkPythonCartPole/loop steps/s", true},
	{"Python CartPole via bridge, batch=8 vs plain Python loop (env steps/s)", "pyenv.BenchmarkPythonCartPole/batch=8 steps/s", "pyenv.BenchmarkPythonCartPole/loop steps/s", true},
	{"Python CartPole via bridge, batch=64 vs plain Python loop (env steps/s)", "pyenv.BenchmarkPythonCartPole/batch=64 steps/s", "pyenv.BenchmarkPythonCartPole/loop steps/s", true},
	{"Python CartPole, plain Python loop vs built-in Go CartPole (env steps/s)", "pyenv.BenchmarkPythonCartPole/loop steps/s", "env.BenchmarkCartPoleStep steps/s", true},
	{"Python CartPole via bridge, batch=64 vs built-in Go CartPole (env steps/s)", "pyenv.BenchmarkPythonCartPole/batch=64 steps/s", "env.BenchmarkCartPoleStep steps/s", true},
	{"actor, inline policy, Python CartPole ring=8 vs Go CartPole ring=8 (env steps/s)", "actorworker.BenchmarkActorInline/python-ring=8 steps/s", "actorworker.BenchmarkActorInline/ring=8 steps/s", true},
	{"actor, inline policy, Python CartPole ring=64 vs Go CartPole ring=8 (env steps/s)", "actorworker.BenchmarkActorInline/python-ring=64 steps/s", "actorworker.BenchmarkActorInline/ring=8 steps/s", true},
	// Not a limit but the encoding it replaces: the ratio is the speed-up.
	{"reading the clock: monoclock.Now vs time.Now (time)", "monoclock.BenchmarkNow/monoclock ns/op", "monoclock.BenchmarkNow/time.Now ns/op", false},
	{"tensor encode, bin vs msgpack float array, 4096 floats (time)", "api.BenchmarkTensorEncodeBin4096 ns/op", "api.BenchmarkFloatsAsMsgpackArray4096 ns/op", false},
	{"sample batch of 27 CartPole steps, encode+decode: codec vs msgpack reflection (time)", "api.BenchmarkSampleBatchCodec/codec ns/op", "api.BenchmarkSampleBatchCodec/reflection ns/op", false},
	{"replay transition of two MinAtar frames, decode: codec vs msgpack reflection (time)", "localreplay.BenchmarkDecodeTransition/codec ns/op", "localreplay.BenchmarkDecodeTransition/reflection ns/op", false},
	{"finite check of a MinAtar batch's 25,600 values: eight a branch vs the math loop (time)", "api.BenchmarkFirstNonFinite/bits ns/op", "api.BenchmarkFirstNonFinite/math ns/op", false},
	// Learning: the distributed pipeline (processes) against the same PPO in
	// one goroutine, where every sample is fresh and nothing crosses a socket.
	{"CartPole to 475: pipeline vs one process (median wall s)", "e2e.BenchmarkLearnCartPole s-to-475", "ppo.BenchmarkSolveCartPole s-to-475", false},
	{"CartPole to 475: pipeline vs one process (median env steps)", "e2e.BenchmarkLearnCartPole steps-to-475", "ppo.BenchmarkSolveCartPole steps-to-475", false},
	{"trainer samples/s in the pipeline vs PPO update alone", "e2e.BenchmarkLearnCartPole trainer-samples/s", "ppo.BenchmarkPPOUpdate/minibatch=256 samples/s", true},
	{"PPO update, minibatch=256 (samples/s)", "ppo.BenchmarkPPOUpdate/minibatch=256 samples/s", "", true},
	{"DQN update of MinAtar's network on the CPU, batch=64 (samples/s)", "dqn.BenchmarkUpdate/net=minatar/batch=64 samples/s", "", true},
	{"DQN update of MinAtar's network on the CPU, batch=512 (samples/s)", "dqn.BenchmarkUpdate/net=minatar/batch=512 samples/s", "", true},
	{"PPO update, minibatch=256, threads=2 vs 1 (samples/s)", "ppo.BenchmarkPPOUpdate/threads=2/minibatch=256 samples/s", "ppo.BenchmarkPPOUpdate/minibatch=256 samples/s", true},
	{"PPO update, minibatch=1024, threads=2 vs 1 (samples/s)", "ppo.BenchmarkPPOUpdate/threads=2/minibatch=1024 samples/s", "ppo.BenchmarkPPOUpdate/minibatch=1024 samples/s", true},
	{"PPO trainer's intake at MinAtar's size, learning aside (samples/s)", "trainerworker.BenchmarkTrainerIntake/overlap=false samples/s", "", true},
	{"DQN trainer's intake at MinAtar's size, batches of 256, learning aside (samples/s)", "trainerworker.BenchmarkDQNTrainerIntake/in_flight=2/overlap=false samples/s", "", true},
	// The trainer's loop outside updates, per sample trained: the intake's
	// own cost, which a GPU learner leaves as the trainer's CPU work.
	{"PPO trainer's loop outside updates at MinAtar's size (us/sample)", "trainerworker.BenchmarkTrainerIntake/overlap=false loop-us/sample", "", false},
	{"DQN trainer's loop outside updates at MinAtar's size, batches of 256 (us/sample)", "trainerworker.BenchmarkDQNTrainerIntake/in_flight=2/overlap=false loop-us/sample", "", false},
	// Taking samples in while the update runs (overlap: a GPU learner's
	// default) against in turn (the CPU's), same run. The 2-core machine
	// has no core to spare for it when the update is on the CPU.
	{"PPO trainer's intake, overlapping vs in turn (samples/s)", "trainerworker.BenchmarkTrainerIntake/overlap=true samples/s", "trainerworker.BenchmarkTrainerIntake/overlap=false samples/s", true},
	{"DQN trainer's intake, in_flight=8, overlapping vs in turn (samples/s)", "trainerworker.BenchmarkDQNTrainerIntake/in_flight=8/overlap=true samples/s", "trainerworker.BenchmarkDQNTrainerIntake/in_flight=8/overlap=false samples/s", true},
	{"PPO trainer of MinAtar's network on the CPU, overlapping vs in turn (samples/s)", "trainerworker.BenchmarkTrainerOverlap/overlap=true samples/s", "trainerworker.BenchmarkTrainerOverlap/overlap=false samples/s", true},
	// Bounded staleness in a trainer-bound trial: batches of one version
	// (the actors' version_cuts) against batches that mix them, same run.
	{"minatar-breakout-ppo to 250k frames: steps dropped as stale, version cuts vs none (%)", "e2e.BenchmarkStaleDrops dropped-%-cuts", "e2e.BenchmarkStaleDrops dropped-%-nocuts", false},
	{"minatar-breakout-ppo to 250k frames: samples trained, version cuts vs none", "e2e.BenchmarkStaleDrops trained-samples-cuts", "e2e.BenchmarkStaleDrops trained-samples-nocuts", true},
	{"policy lag at the trainer, p50 (versions)", "e2e.BenchmarkLearnCartPole lag-p50", "", false},
	{"policy lag at the trainer, p99 (versions)", "e2e.BenchmarkLearnCartPole lag-p99", "", false},
	// Replay (package replay): a prioritized table of 1M items against the
	// bare sum-tree operation its insert and draw are built on.
	{"replay table insert (1M items, full) vs sum-tree set (items/s)", "replay.BenchmarkTableInsert items/s", "replay.BenchmarkSumTreeSet items/s", true},
	{"replay table sample batch=32 (1M items) vs sum-tree find (items/s)", "replay.BenchmarkTableSample/batch=32 items/s", "replay.BenchmarkSumTreeFind items/s", true},
	{"replay table sample batch=256 (1M items) vs sum-tree find (items/s)", "replay.BenchmarkTableSample/batch=256 items/s", "replay.BenchmarkSumTreeFind items/s", true},
	{"replay priority update, 256 ids (1M items) vs sum-tree set (items/s)", "replay.BenchmarkTableUpdatePriorities items/s", "replay.BenchmarkSumTreeSet items/s", true},
	// Off-policy: DQN with prioritized replay in one process against PPO in
	// one process (both to a mean return of 475 on CartPole).
	{"CartPole to 475: DQN + prioritized replay vs PPO, one process (wall s)", "dqn.BenchmarkSolveCartPole s-to-475", "ppo.BenchmarkSolveCartPole s-to-475", false},
	{"CartPole to 475: DQN + prioritized replay vs PPO, one process (env steps)", "dqn.BenchmarkSolveCartPole steps-to-475", "ppo.BenchmarkSolveCartPole steps-to-475", false},
	// Replay over the wire (package replayworker): CartPole transitions
	// inserted by one client and sampled by another through a replay worker.
	{"replay worker: transitions inserted over the wire vs raw PUSH/PULL (MB/s)", "replayworker.BenchmarkReplayThroughput MB/s", "stream.BenchmarkRawPushPull64KiB MB/s", true},
	{"replay worker: transitions inserted (per s)", "replayworker.BenchmarkReplayThroughput inserts/s", "", true},
	{"replay worker: transitions sampled, batches of 64 (per s)", "replayworker.BenchmarkReplayThroughput samples/s", "", true},
	// Through rlctl start, one after the other in the same run.
	{"rlctl start to 475: cartpole-apex vs cartpole-ppo (wall s)", "e2e.BenchmarkStartCartPole/experiment=cartpole-apex s-to-475", "e2e.BenchmarkStartCartPole/experiment=cartpole-ppo s-to-475", false},
	{"rlctl start to 475: cartpole-apex vs cartpole-ppo (env steps)", "e2e.BenchmarkStartCartPole/experiment=cartpole-apex steps-to-475", "e2e.BenchmarkStartCartPole/experiment=cartpole-ppo steps-to-475", false},
	// Multi-agent learning (docs/spread.md): spread-ppo's team return (MAPPO's
	// reward definition, summed over agents) at MAPPO's 20M env steps against
	// the end of MAPPO's Spread curve. Returns are negative, so the row is
	// lower-is-better in form: bar/measured, 1.00x as good as MAPPO.
	{"spread-ppo team return at 20M env steps vs MAPPO's Spread curve (bar -110)", "e2e.BenchmarkSpreadMAPPO team-return", "bar -110", false},
	// Hostile input: an echo worker process gets 100k valid requests with
	// one random byte changed each; its resident memory after them is held
	// against its memory before (1.00x: nothing kept).
	{"echo worker RSS after vs before 100k corrupted requests (MB)", "e2e.BenchmarkCorruptedRequests rss-after-MB", "e2e.BenchmarkCorruptedRequests rss-before-MB", false},
	{"slowest reply among 100k corrupted requests (ms)", "e2e.BenchmarkCorruptedRequests max-reply-ms", "", false},
	// A worker at its maximum request rate for 60 s: its last sample held
	// against its first (after 5 s); 1.00x is flat.
	{"echo worker RSS after 60s vs after 5s at max request rate (MB)", "e2e.BenchmarkWorkerSteady rss-last-MB", "e2e.BenchmarkWorkerSteady rss-first-MB", false},
	{"echo worker open fds after 60s vs after 5s", "e2e.BenchmarkWorkerSteady fds-last", "e2e.BenchmarkWorkerSteady fds-first", false},
	{"echo worker goroutines after 60s vs after 5s", "e2e.BenchmarkWorkerSteady goroutines-last", "e2e.BenchmarkWorkerSteady goroutines-first", false},
	{"echo worker requests per second, 4 clients", "e2e.BenchmarkWorkerSteady req/s", "", false},
	// The controller.
	{"rlctl start to all RUNNING, 64 echo workers, a process each (s)", "e2e.BenchmarkStartupEcho/workers=64 startup-s", "", false},
	{"controller CPU share during a run, 64 workers, a process each (%)", "e2e.BenchmarkStartupEcho/workers=64 ctl-cpu-%", "", false},
	{"rlctl start to all RUNNING, 256 echo workers (16 per process) (s)", "e2e.BenchmarkStartupEcho/workers=256/per_process=16 startup-s", "", false},
	// Many workers per process (workers.echo.per_process=256: 16 hosts of
	// 256 for 4096), held against the bar of 10 s on this machine.
	{"rlctl start to all RUNNING, 1024 echo workers (256 per process) (s)", "e2e.BenchmarkStartupEcho/workers=1024/per_process=256 startup-s", "", false},
	{"rlctl start to all RUNNING, 4096 echo workers (256 per process) vs the bar (s)", "e2e.BenchmarkStartupEcho/workers=4096/per_process=256 startup-s", "bar 10", false},
	{"controller CPU share during a run, 4096 workers (256 per process) (%)", "e2e.BenchmarkStartupEcho/workers=4096/per_process=256 ctl-cpu-%", "", false},
	// Watching a trial (docs/metrics.md): cartpole-sink with every worker
	// process serving /metrics, unscraped and scraped every second by a real
	// Prometheus, against --no-metrics, alternating runs (the goal: within 3%);
	// and one scrape of a process hosting 256 workers against a group
	// request to as many workers hosted the same way.
	{"cartpole-sink env steps/s, metrics served vs off", "e2e.BenchmarkMetricsCost served-steps/s", "e2e.BenchmarkMetricsCost off-steps/s", true},
	{"cartpole-sink env steps/s, metrics read every 1 s (Prometheus's requests, no Prometheus) vs off", "e2e.BenchmarkMetricsCost polled-steps/s", "e2e.BenchmarkMetricsCost off-steps/s", true},
	{"cartpole-sink env steps/s, metrics scraped every 1 s by Prometheus on the same 2 cores vs off", "e2e.BenchmarkMetricsCost scraped-steps/s", "e2e.BenchmarkMetricsCost off-steps/s", true},
	{"scrape of one process hosting 256 workers vs a group request to 256 hosted (median ms)", "e2e.BenchmarkScrapeHosted p50-ms", "e2e.BenchmarkGroupRequestHosted/workers=256 p50-ms", false},
	{"scrape of one process hosting 256 workers: payload (KiB)", "e2e.BenchmarkScrapeHosted payload-KiB", "", false},
	{"scrape of one process hosting 256 workers vs issue 39's bar (p99 ms)", "e2e.BenchmarkScrapeHosted p99-ms", "bar 20", false},
	// A scrape's own cost: the handler as served (no gzip, no buffering)
	// against promhttp's defaults with a timeout, and this package's process
	// collector against client_golang's (docs/metrics.md).
	{"scrape handler, 1 worker's series: as served vs promhttp's defaults (ns)", "telemetry.BenchmarkScrape/workers=1/served ns/op", "telemetry.BenchmarkScrape/workers=1/stock ns/op", false},
	{"scrape handler, 256 workers' series: as served vs promhttp's defaults (ns)", "telemetry.BenchmarkScrape/workers=256/served ns/op", "telemetry.BenchmarkScrape/workers=256/stock ns/op", false},
	{"process collector: distrl's vs client_golang's (ns)", "telemetry.BenchmarkProcessCollector/distrl ns/op", "telemetry.BenchmarkProcessCollector/client_golang ns/op", false},
	// Data-parallel learning (package collective, docs/trainer-groups.md):
	// a ring all-reduce of float32 parameters between members on one node,
	// over shared memory and over ZeroMQ, against the same bytes moved in
	// the same pattern over bare PUSH/PULL,
	// and one PPO update of MinAtar's network by a group against one
	// learner, all members sharing this machine's cores.
	{"all-reduce, 2 members, 5k float32, shared memory vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=2/params=5k/shm us/op", "collective.BenchmarkRawRing/members=2/params=5k us/op", false},
	{"all-reduce, 2 members, 140k float32, shared memory vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=2/params=140k/shm us/op", "collective.BenchmarkRawRing/members=2/params=140k us/op", false},
	{"all-reduce, 2 members, 1M float32, shared memory vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=2/params=1M/shm us/op", "collective.BenchmarkRawRing/members=2/params=1M us/op", false},
	{"all-reduce, 4 members, 5k float32, shared memory vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=4/params=5k/shm us/op", "collective.BenchmarkRawRing/members=4/params=5k us/op", false},
	{"all-reduce, 4 members, 140k float32, shared memory vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=4/params=140k/shm us/op", "collective.BenchmarkRawRing/members=4/params=140k us/op", false},
	{"all-reduce, 4 members, 1M float32, shared memory vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=4/params=1M/shm us/op", "collective.BenchmarkRawRing/members=4/params=1M us/op", false},
	{"all-reduce, 2 members, 5k float32, ZeroMQ (DISTRL_SHM=0) vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=2/params=5k/zmq us/op", "collective.BenchmarkRawRing/members=2/params=5k us/op", false},
	{"all-reduce, 2 members, 140k float32, ZeroMQ (DISTRL_SHM=0) vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=2/params=140k/zmq us/op", "collective.BenchmarkRawRing/members=2/params=140k us/op", false},
	{"all-reduce, 2 members, 1M float32, ZeroMQ (DISTRL_SHM=0) vs a raw ZeroMQ ring of the same bytes (us)", "collective.BenchmarkAllreduce/members=2/params=1M/zmq us/op", "collective.BenchmarkRawRing/members=2/params=1M us/op", false},
	{"PPO update of MinAtar's network, group of 2 vs one learner (samples/s)", "ppo.BenchmarkGroupUpdate/members=2 samples/s", "ppo.BenchmarkGroupUpdate/members=1 samples/s", true},
	{"PPO update of MinAtar's network, group of 4 vs one learner (samples/s)", "ppo.BenchmarkGroupUpdate/members=4 samples/s", "ppo.BenchmarkGroupUpdate/members=1 samples/s", true},
	{"cartpole-ppo to 475, rlctl start wall: 2 trainers as a group vs 1 (s)", "e2e.BenchmarkTrainerGroupCartPole/cartpole-ppo/trainers=2 s-to-475", "e2e.BenchmarkTrainerGroupCartPole/cartpole-ppo/trainers=1 s-to-475", false},
	{"cartpole-apex to 475, rlctl start wall: 2 DQN trainers as a group vs 1 (s)", "e2e.BenchmarkTrainerGroupCartPole/cartpole-apex/trainers=2 s-to-475", "e2e.BenchmarkTrainerGroupCartPole/cartpole-apex/trainers=1 s-to-475", false},
	// SLURM (a real 3-node cluster in network namespaces on this machine,
	// scripts/slurmcluster.sh) against the local scheduler, same name server.
	{"rlctl start to all RUNNING, 64 echo workers: slurm vs local (s)", "e2e.BenchmarkSlurmStartupEcho/scheduler=slurm startup-s", "e2e.BenchmarkSlurmStartupEcho/scheduler=local startup-s", false},
	{"cartpole-ppo to 475, rlctl start wall: slurm vs local (s)", "e2e.BenchmarkSlurmLearnCartPole/scheduler=slurm s-to-475", "e2e.BenchmarkSlurmLearnCartPole/scheduler=local s-to-475", false},
	// Issue 39's bar: 0.7x. The actors' rings grow across nodes (actorworker/grow.go).
	{"cartpole-ppo env steps/s: slurm (actors' policy worker across nodes) vs local", "e2e.BenchmarkSlurmLearnCartPole/scheduler=slurm env-steps/s", "e2e.BenchmarkSlurmLearnCartPole/scheduler=local env-steps/s", true},
})

// results maps "pkg.Benchmark metric" to its value.
type results map[string]float64

func parse(r io.Reader) (results, error) {
	out := results{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndex(p, "/")+1:]
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 { // drop the -GOMAXPROCS suffix
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		// f[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			out[pkg+"."+name+" "+f[i+1]] = v
		}
	}
	return out, sc.Err()
}

// pipelineBreakdown are the rows that say where the pipeline's time goes,
// per configuration of BenchmarkPipelineActors: the fraction of the window
// the actors and the policy worker were busy (the rest they waited), how
// often a wait ended on input found in shared memory rather than by a
// wake-up (worker.MemoryWaiter), and what crossed the sockets and what CPU
// was spent per environment step.
func pipelineBreakdown() []row {
	figures := []struct{ metric, title string }{
		{"actor-busy", "actor busy fraction"},
		{"policy-busy", "policy worker busy fraction"},
		{"actor-spun/req", "replies found by looking, per inference request"},
		{"policy-spun/batch", "policy worker waits ended by looking, per batch"},
		{"req-msgs/step", "inference requests per env step"},
		{"sample-msgs/step", "sample messages per env step"},
		{"bytes/step", "bytes per env step"},
		{"cpu-us/step", "CPU us per env step, all processes"},
	}
	var out []row
	for _, actors := range []int{1, 2, 4} {
		for _, envs := range []int{8, 64, 256} {
			for _, f := range figures {
				out = append(out, row{
					title:    fmt.Sprintf("pipeline %dx%d: %s", actors, envs, f.title),
					measured: fmt.Sprintf("e2e.BenchmarkPipelineActors/actors=%d/envs=%d %s", actors, envs, f.metric),
				})
			}
		}
	}
	return out
}

// scaleRows are cartpole-sink's figures on a machine of many cores
// (BenchmarkPipelineScale, sized for 16): env steps/s of 1 to 14 actors of
// 64 CartPoles with 1, 2 or 4 policy workers, against one actor with one,
// and 14 actors with 4 against issue 24's bar of 1.5M.
func scaleRows() []row {
	key := func(actors, policies int) string {
		return fmt.Sprintf("e2e.BenchmarkPipelineScale/actors=%d/policies=%d steps/s", actors, policies)
	}
	var out []row
	for _, actors := range []int{1, 2, 4, 8, 14} {
		for _, policies := range []int{1, 2, 4} {
			if policies > actors {
				continue
			}
			out = append(out, row{
				title:          fmt.Sprintf("pipeline %d actors x 64, %d policy workers vs 1 actor, 1 policy worker (env steps/s)", actors, policies),
				measured:       key(actors, policies),
				limit:          key(1, 1),
				higherIsBetter: true,
			})
		}
	}
	for _, policies := range []int{1, 2, 4} {
		out = append(out, row{
			title:          fmt.Sprintf("pipeline 14 actors x 64, %d policy workers vs the 16-core bar (env steps/s)", policies),
			measured:       key(14, policies),
			limit:          "bar 1500000",
			higherIsBetter: true,
		})
	}
	return out
}

// kernelRows hold package nn's native kernels (OpenBLAS and the vectorised
// C of tanh, Adam, the elementwise loops and im2col) against gonum's pure-Go ones, which every build ran on before, and
// against OpenBLAS's Prescott fallback, in the same run and on one core: a
// forward pass, and a learner's forward and backward, of CartPole's MLP, a
// 512x512 one and (against the fallback) MinAtar's network.
func kernelRows() []row {
	var out []row
	// against: the kernels the native ones are held against, and where.
	for _, against := range []struct {
		kernels, what, netKind string
		nets                   []string
		batches                []int
	}{
		{"gonum", "gonum", "MLP", []string{"cartpole", "512x512"}, []int{64, 512, 4096}},
		{"gonum", "the pure-Go kernels", "network", []string{"minatar"}, []int{64, 512}},
		// The kernels distrl chose against OpenBLAS's fallback for a CPU it
		// does not know (the same where OpenBLAS chose itself).
		{"prescott", "OpenBLAS's Prescott fallback", "network", []string{"cartpole", "512x512", "minatar"}, []int{64, 512}},
	} {
		for _, pass := range []struct{ bench, title string }{{"BenchmarkForwardKernels", "forward"}, {"BenchmarkTrainKernels", "forward+backward"}} {
			for _, net := range against.nets {
				for _, batch := range against.batches {
					key := func(k string) string {
						return fmt.Sprintf("nn.%s/kernels=%s/net=%s/batch=%d rows/s", pass.bench, k, net, batch)
					}
					out = append(out, row{
						title:          fmt.Sprintf("nn %s, %s %s, batch=%d, one core: native vs %s (rows/s)", pass.title, net, against.netKind, batch, against.what),
						measured:       key("native"),
						limit:          key(against.kernels),
						higherIsBetter: true,
					})
				}
			}
		}
	}
	// dense.c against the GEMM path at an actor's batches.
	for _, c := range []struct {
		net   string
		batch int
	}{{"cartpole", 8}, {"cartpole", 64}, {"minatar", 1}} {
		key := func(k string) string {
			return fmt.Sprintf("nn.BenchmarkForwardKernels/kernels=%s/net=%s/batch=%d rows/s", k, c.net, c.batch)
		}
		out = append(out, row{
			title:    fmt.Sprintf("nn forward, %s, batch=%d, one core: native vs every dense layer a GEMM (rows/s)", c.net, c.batch),
			measured: key("native"), limit: key("gemm"), higherIsBetter: true,
		})
	}
	// tanh.c's paths against its loop a value at a time, which every CPU
	// without AVX-512 ran before the AVX2 path (a path the CPU lacks is
	// not measured).
	for _, path := range []string{"native", "avx2", "avx512"} {
		out = append(out, row{
			title:    fmt.Sprintf("nn tanh, 8192 values, one core: %s path vs the loop a value at a time (values/s)", path),
			measured: "nn.BenchmarkTanh/path=" + path + " values/s", limit: "nn.BenchmarkTanh/path=loop values/s", higherIsBetter: true,
		})
	}
	for _, path := range []string{"native", "avx2", "avx512"} {
		out = append(out, row{
			title:    fmt.Sprintf("nn im2col, MinAtar's 56 images, one core: %s path vs lower in Go (windows/s)", path),
			measured: "nn.BenchmarkIm2col/path=" + path + " windows/s", limit: "nn.BenchmarkIm2col/path=go windows/s", higherIsBetter: true,
		})
	}
	// dense.c's layers of an actor's small batches against a bias fill, a
	// GEMM and an activation, which they ran as before.
	for _, shape := range []string{"4x64", "64x64", "64x2", "512x512", "1024x128"} {
		for _, batch := range []int{1, 8, 32} {
			key := fmt.Sprintf("nn.BenchmarkDenseLayer/%s/batch=%d/path=", shape, batch)
			out = append(out, row{
				title:    fmt.Sprintf("nn dense layer %s, batch=%d, one core: native vs bias fill, GEMM, activation (rows/s)", shape, batch),
				measured: key + "native rows/s", limit: key + "gemm rows/s", higherIsBetter: true,
			})
		}
	}
	out = append(out, row{
		title:    "nn Adam step, 150k parameters, one core: native vs Go's loop (Mparams/s)",
		measured: "nn.BenchmarkAdam/kernels=native Mparams/s", limit: "nn.BenchmarkAdam/kernels=gonum Mparams/s", higherIsBetter: true,
	})
	return out
}

// gpuRows are the GPU's figures (build tag cuda; scripts/gpu-check.sh on a
// GPU machine): the policy's forward pass in rows/s against the CPU backend
// on all the machine's cores, where the GPU's time per batch goes, the
// PPO and DQN updates of MinAtar's network against the CPU learner, the
// MinAtar trials with their learners on the GPU against the CPU, and the
// pipeline of 14 actors of 64 CartPoles with the policy worker on cuda:0
// against the same pipeline with it on the CPU.
func gpuRows() []row {
	var out []row
	for _, net := range []string{"64x64", "512x512", "minatar-conv"} {
		for _, batch := range []int{64, 512, 4096, 8192} {
			key := fmt.Sprintf("cuda.BenchmarkBackend/net=%s/batch=%d/device=", net, batch)
			out = append(out, row{
				title:    fmt.Sprintf("policy forward %s, batch=%d: GPU vs CPU backend, all cores (rows/s)", net, batch),
				measured: key + "cuda rows/s", limit: key + "cpu-all rows/s", higherIsBetter: true,
			})
			for _, part := range []string{"copyin", "kernels", "copyout"} {
				out = append(out, row{
					title:    fmt.Sprintf("policy forward %s, batch=%d: GPU %s per batch (us)", net, batch, part),
					measured: key + "cuda " + part + "-us",
				})
			}
		}
	}
	out = append(out,
		row{title: "PPO update of MinAtar's network: GPU vs CPU learner, all cores (samples/s)",
			measured: "ppo.BenchmarkUpdateMinAtar/device=cuda samples/s", limit: "ppo.BenchmarkUpdateMinAtar/device=cpu-all samples/s", higherIsBetter: true},
		row{title: "PPO update of MinAtar's network on the GPU: whole steps vs one minibatch at a time, the loss on the host (samples/s)",
			measured: "ppo.BenchmarkUpdateMinAtar/device=cuda samples/s", limit: "ppo.BenchmarkUpdateMinAtar/device=cuda-stepwise samples/s", higherIsBetter: true},
	)
	for _, batch := range []int{64, 256, 512} {
		key := fmt.Sprintf("dqn.BenchmarkUpdateMinAtar/batch=%d/device=", batch)
		out = append(out, row{title: fmt.Sprintf("DQN update of MinAtar's network, batch=%d: GPU vs CPU learner (samples/s)", batch),
			measured: key + "cuda samples/s", limit: key + "cpu samples/s", higherIsBetter: true},
			row{title: fmt.Sprintf("DQN update of MinAtar's network on the GPU, batch=%d: whole vs one pass at a time, the loss on the host (samples/s)", batch),
				measured: key + "cuda samples/s", limit: key + "cuda-stepwise samples/s", higherIsBetter: true})
	}
	const minatar = "e2e.BenchmarkMinAtarCUDA/exp="
	out = append(out,
		row{title: "minatar-breakout-ppo-cuda (frames/s; bar 100k)", measured: minatar + "minatar-breakout-ppo-cuda/trainer=cuda:0 frames/s",
			limit: "bar 100000", higherIsBetter: true},
		row{title: "minatar-breakout-ppo-cuda: trainer on cuda:0 vs on the CPU (trainer samples/s)",
			measured: minatar + "minatar-breakout-ppo-cuda/trainer=cuda:0 trained/s", limit: minatar + "minatar-breakout-ppo-cuda/trainer=cpu trained/s", higherIsBetter: true},
		row{title: "minatar-breakout-apex-cuda vs minatar-breakout-apex (frames/s)",
			measured: minatar + "minatar-breakout-apex-cuda/trainer=cuda:0 frames/s", limit: minatar + "minatar-breakout-apex/trainer=cpu frames/s", higherIsBetter: true},
		row{title: "minatar-breakout-ppo-cuda: GPU trainer overlapping vs in turn (trainer samples/s)",
			measured: minatar + "minatar-breakout-ppo-cuda/trainer=cuda:0 trained/s", limit: minatar + "minatar-breakout-ppo-cuda/trainer=cuda:0/overlap=false trained/s", higherIsBetter: true},
		row{title: "minatar-breakout-apex-cuda: GPU learner overlapping vs in turn (frames/s)",
			measured: minatar + "minatar-breakout-apex-cuda/trainer=cuda:0 frames/s", limit: minatar + "minatar-breakout-apex-cuda/trainer=cuda:0/overlap=false frames/s", higherIsBetter: true},
	)
	// What bounds the GPU trainers: the share of the window the learner
	// updated, and the loop was busy outside updates (either near 1: that
	// side; neither: the actors).
	for _, exp := range []string{"minatar-breakout-ppo-cuda", "minatar-breakout-apex-cuda"} {
		for _, part := range []string{"learner", "loop"} {
			out = append(out, row{title: fmt.Sprintf("%s: GPU trainer's %s busy (share of the window)", exp, part),
				measured: fmt.Sprintf("%s%s/trainer=cuda:0 %s-busy", minatar, exp, part), higherIsBetter: true})
		}
	}
	for _, net := range []string{"64x64", "512x512"} {
		key := fmt.Sprintf("e2e.BenchmarkPipelineCUDA/net=%s/device=", net)
		out = append(out, row{
			title:    fmt.Sprintf("pipeline 14x64, policy %s on cuda:0 vs on the CPU (env steps/s)", net),
			measured: key + "cuda:0 steps/s", limit: key + "cpu steps/s", higherIsBetter: true,
		})
	}
	for _, actors := range []int{1, 2, 4, 8} {
		out = append(out, row{
			title:          fmt.Sprintf("pipeline %dx64, policy 64x64 on cuda:0 (env steps/s)", actors),
			measured:       fmt.Sprintf("e2e.BenchmarkPipelineCUDA/net=64x64/device=cuda:0/actors=%d steps/s", actors),
			higherIsBetter: true,
		})
	}
	return out
}

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtab:", err)
		os.Exit(1)
	}
	write(os.Stdout, res)
}

func write(w io.Writer, res results) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nFIGURE\tMEASURED\tLIMIT (same run)\tRATIO")
	for _, r := range rows {
		m, okM := res[r.measured]
		if r.limit == "" { // a figure of its own, with nothing to hold it against
			fmt.Fprintf(tw, "%s\t%s\t-\t-\n", r.title, fmtVal(m, okM, r.measured))
			continue
		}
		l, okL := res[r.limit]
		limit := fmtVal(l, okL, r.limit)
		if b, ok := bar(r.limit); ok {
			l, okL, limit = b, true, fmtVal(b, true, r.measured)+" (bar)"
		}
		if !okM || !okL || m == 0 || l == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\tnot measured\n", r.title, fmtVal(m, okM, r.measured), limit)
			continue
		}
		ratio := m / l
		if !r.higherIsBetter {
			ratio = l / m
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fx\n", r.title, fmtVal(m, true, r.measured), limit, ratio)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRATIO: 1.00x means as fast as the limit; above 1 is faster (group vs sequential,")
	fmt.Fprintln(w, "ring=N vs ring=1, bin vs msgpack array: the speed-up over the second figure).")
}

// bar reads a limit "bar N", a fixed one.
func bar(limit string) (float64, bool) {
	n, ok := strings.CutPrefix(limit, "bar ")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(n, 64)
	return v, err == nil
}

func fmtVal(v float64, ok bool, key string) string {
	if !ok {
		return "-"
	}
	unit := key[strings.LastIndex(key, " ")+1:]
	return strconv.FormatFloat(v, 'g', 4, 64) + " " + unit
}
