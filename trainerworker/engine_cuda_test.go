//go:build cuda || cudaemu

package trainerworker_test

import (
	"testing"

	"github.com/distrl/distrl/internal/cudainit"
	nncuda "github.com/distrl/distrl/nn/cuda"
	"github.com/distrl/distrl/trainerworker"
)

// TestCUDATrainsOnAnEngine: TestTrainsOnAnEngine with rlctl-cuda's engines
// (nn/cuda on GPU 0, or its host emulator): a GPU trainer's checkpoint
// resumes on a CPU trainer at the same version and parameters, and back.
func TestCUDATrainsOnAnEngine(t *testing.T) {
	if err := cudainit.Err(); err != nil {
		t.Skip(err)
	}
	checkTrainsOnAnEngine(t, trainerworker.Engines{"cuda": nncuda.EngineOpener})
}
