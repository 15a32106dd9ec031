// Package trainerworker is the "trainer" worker type: it consumes the
// sample batches actors send, trains a policy with PPO (package algo/ppo),
// publishes each new version of the parameters through the parameter
// service (package paramstream), from which policy workers fetch them, and
// writes checkpoints it can resume from.
//
// # The loop
//
// Each Poll answers the parameter fetches waiting on the publisher, takes
// sample batches one by one (at most 64) until the buffer holds
// batch_steps agent steps, and then runs one PPO update on every buffered
// step, empties the buffer and increments the version. Batches beyond
// that stay queued in the sample stream, whose queues (the actors'
// sample_queue and this socket's) are kept short, so a trainer that
// falls behind pushes back on the actors rather than letting its updates
// grow or its buffer go stale. Every publish_every
// updates the new parameters are published under that version; every
// checkpoint_every updates (and on close) a checkpoint is written. The
// buffer is an on-policy FIFO: nothing is reused after an update.
//
// Configure publishes the starting parameters (version 0, or the version
// restored from a checkpoint) at once, so policy workers serve the
// trainer's parameters rather than their own random initialisation from
// the start, and batch versions mean the same on both sides.
//
// # Staleness
//
// A batch's policy_version is the oldest version that chose one of its
// actions; an actor cuts its batches where a newer version starts acting
// (version_cuts, the default), so that a batch is of one version and the
// rule below drops no fresh step with a stale one. Its lag is the trainer's version minus that; a batch whose lag
// exceeds max_staleness (K, default 2) is dropped and counted
// (dropped_stale), because PPO's importance ratios are only trustworthy
// near the behaviour policy. A batch from a version newer than the
// trainer's (a trainer resumed from a checkpoint older than the version
// actors were using) is dropped too (dropped_future). Episodes in dropped
// batches still count towards mean_return: they happened.
//
// A batch PPO cannot use (another policy's, observations of the wrong
// width, no log-probabilities, actions out of range, non-finite values) is
// rejected and counted without failing the update it would have joined;
// the status carries a warning until an update passes without rejections.
// An update whose gradient turns out non-finite is rolled back to the
// state before it and its samples dropped; three in a row move the worker
// to ERROR.
//
// # Checkpoints
//
// With a checkpoint_dir, a checkpoint of version V is the file
// ckpt-{V:010d}.ckpt: a 24-byte header (magic "DRLCKPT\x00", format
// version, CRC-32C of the payload, payload length) followed by msgpack of
// [Checkpoint]: the version, the learner's complete state
// (ppo.LearnerState: parameters, Adam moments, update count, shuffler),
// the counters, and a hash of the policy name and network architecture. A
// file is written to a temporary name in the same directory, fsynced,
// renamed into place and the directory fsynced, so a crash leaves either
// the old files or the new one whole. The newest three are kept.
//
// On configure the trainer loads the newest valid checkpoint: one whose
// length or CRC does not match (cut short by a crash, damaged) is logged
// and skipped and the one before it used; temporary files are ignored. It
// restores the learner and the version and publishes that version, so a
// restarted trainer resumes where its last checkpoint left off and
// versions keep increasing. Checkpoints are written before the version is
// published, so with checkpoint_every equal to publish_every no policy
// worker ever holds a version newer than the last checkpoint. A
// checkpoint written for another policy or architecture is refused
// (bad_arguments, wrapping ErrCheckpointMismatch); hyperparameters may
// change between runs.
//
// # Configuration
//
// The "configure" kwargs are [Config]: policy, env and env_config (the
// network's dimensions come from the environment, as a policy worker's
// do), conv, hidden, activation and shared_trunk (the network, as a
// policy worker's: its policy workers must be given the same), seed, ppo (overrides of ppo.DefaultConfig() by
// their msgpack names, such as lr, lr_decay_updates, epochs,
// minibatch_size), sample_stream, batch_steps (1024), max_staleness (2),
// publish_every (1), checkpoint_dir, checkpoint_every (10) and
// max_updates (0: unbounded; the worker completes after that many), and
// device: "cpu" (default) or "cuda:N", where the learner trains (PPO and
// DQN alike; NewType's Engines say which a binary can drive: rlctl-cuda's
// is nn/cuda's GPU engine; docs/gpu.md). Unknown keys are refused, also
// inside ppo.
//
// # Statistics
//
// The "stats" reply adds: device (where the learner trains), version,
// updates, samples_trained,
// train_samples_per_s (steps into updates per second over the last 20
// updates), the last update's policy_loss, value_loss, entropy,
// approx_kl, clip_frac, explained_variance, grad_norm, lr, update_ms and
// update_samples; policy_lag (mean), policy_lag_p50 and policy_lag_p99
// over the last 1000 batches; episodes and mean_return (last 20 episodes);
// buffer_steps; dropped_stale, dropped_future, dropped_steps, rejected,
// update_failures; checkpoints, checkpoint_failures, checkpoint_version,
// resumed_from (-1 for a fresh start); published, published_version,
// fetches_served. The worker base's samples and samples_per_s count agent
// steps received.
package trainerworker
