//go:build cuda

package main

import (
	"github.com/distrl/distrl/policy/cuda"
	"github.com/distrl/distrl/policyworker"
)

// accel: rlctl-cuda runs policies on NVIDIA GPUs too.
var accel = accelerator{
	kind:    "cuda",
	devices: cuda.Devices,
	policy:  policyworker.Devices{"cuda": cuda.Opener},
}
