// Package policyworker is the "policy" worker type: a policy worker serves
// batched inference to actors over the inference stream.
//
// Each Poll takes every whole request that has arrived (from any number of
// actors, up to max_batch observations), runs them through the policy in
// one forward pass and answers each request. Batching across actors is the
// point of a policy worker: a forward pass over 64 rows costs little more
// than over one, so one policy worker keeps many actors busy. The worker
// watches the inference socket, so an idle policy worker sleeps until a
// request arrives and answers it at once rather than on its next idle tick.
//
// Configuration (the kwargs of "configure"):
//
//	policy         inference stream name (default "default")
//	env            registered environment whose spaces give the dimensions,
//	env_config     and its configuration; or instead
//	obs_dim, action_dim, head ("categorical" | "gaussian"), and obs_shape
//	               ([H, W, C], for conv)
//	conv           convolutions before the hidden layers, for an image
//	               observation: [{filters, kernel, stride, padding}, ...]
//	               (default none; MinAtar's: [{filters: 16, kernel: 3, stride: 1}])
//	hidden         hidden layer widths (default [64, 64]; [] for a linear policy)
//	shared_trunk   one trunk for the policy and value heads (default false)
//	activation     "tanh" (default) | "relu"
//	seed           initial parameters and sampling (default 0)
//	deterministic  greedy actions instead of sampling (default false)
//	max_batch      most observations per forward pass (default 512)
//	device         "cpu" (default) or "cuda:N": the forward pass on NVIDIA
//	               GPU N, in a binary built with the cuda tag (rlctl-cuda;
//	               package policy/cuda); rlctl refuses it
//	follow_params  load the versions the trainer publishes (default true)
//	param_cache_dir  node cache for published parameters (default
//	               paramstream.DefaultCacheDir)
//
// Commands, besides the standard ones:
//
//	load_params {version, params}  replace the parameters (a flat float32 tensor)
//	get_params                     -> {version, params}
//
// The binary that hosts the type registers it, and the environments its
// configurations may name, once at start: the type in the worker.Registry
// it passes to worker.New (Add(NewType(devices))), the environments in
// api's registry (env.Register). The type registers nothing itself.
//
// # Published parameters
//
// A policy worker follows the parameters the trainer publishes for its
// policy (package paramstream). On configure it loads the newest version,
// if any has been published, so a policy worker that restarts mid-training
// serves the current policy at once; afterwards each Poll takes a new
// version, if one has arrived, before it serves its batch, so parameters
// never change within a batch and each answer's version names the
// parameters that made it. Fetching a new version never stalls serving:
// the request goes out in one Poll and the reply is loaded in a later one.
// The policy workers of a machine share one network fetch per version
// through the node cache. Without a publisher the worker keeps its
// parameters and loads the first version that appears.
//
// load_params still sets parameters and a version explicitly; the next
// version the trainer publishes replaces them.
package policyworker
