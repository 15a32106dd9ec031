//go:build cuda || cudaemu

package main

import (
	nncuda "github.com/distrl/distrl/nn/cuda"
	"github.com/distrl/distrl/policy/cuda"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/trainerworker"
)

// accel: rlctl-cuda runs policies and trainers on NVIDIA GPUs too.
var accel = accelerator{
	kind:    "cuda",
	devices: nncuda.Devices,
	policy:  policyworker.Devices{"cuda": cuda.Opener},
	trainer: trainerworker.Engines{"cuda": nncuda.EngineOpener},
}
