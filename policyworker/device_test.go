package policyworker_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// errUnsupported stands for cuda.ErrUnsupported, which needs the cuda tag.
var errUnsupported = errors.New("network not supported")

// countingBackend is a device backend for the tests: the CPU's forward
// pass behind an opener that counts what the worker opens and closes, so
// that the seam itself (device selection, ordinal, Close on reconfigure
// and exit) is tested without a GPU. policy/cuda's own tests cover the GPU.
type countingBackend struct {
	policy.Backend
	closed *atomic.Int32
}

func (b countingBackend) Close() error {
	b.closed.Add(1)
	return b.Backend.Close()
}

func TestDeviceBackend(t *testing.T) {
	var opened, closed atomic.Int32
	var ordinal atomic.Int32
	devices := policyworker.Devices{"cuda": func(n int) policy.OpenBackend {
		ordinal.Store(int32(n))
		return func(net *nn.ActorCritic) (policy.Backend, error) {
			if n == 7 {
				return nil, errors.New("cuda:7: the driver sees 1 CUDA devices")
			}
			if len(net.Spec().Conv) > 0 { // as policy/cuda refuses them
				return nil, fmt.Errorf("%w: %d convolutions", errUnsupported, len(net.Spec().Conv))
			}
			opened.Add(1)
			return countingBackend{Backend: policy.NewCPUBackend(net, 1), closed: &closed}, nil
		}
	}}
	reg := workertest.Registry(map[string]worker.Factory{policyworker.TypeName: policyworker.NewFactory(devices)})
	repo := workertest.Repo(t)
	r := workertest.StartChecked(t, worker.Options{
		Trial: testTrial, Registry: reg, Type: policyworker.TypeName, Host: "127.0.0.1",
		Repo: repo, IdleWait: 10 * time.Millisecond, Logger: testLogger(t),
	})
	f := &fixture{repo: repo, panel: workertest.Panel(t, repo, testTrial), name: r.Name()}

	// A device that fails to open fails configure with its error, named.
	err := f.panel.Request(ctxT(t), f.name, member.CmdConfigure, map[string]any{"env": env.CartPoleName, "device": "cuda:7"}, nil)
	var re *rpc.Error
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "cuda:7") {
		t.Fatalf("configure on a missing device: %v, want a remote error naming cuda:7", err)
	}
	// A network the device cannot run is a bad argument, not a failure of
	// the worker: the controller must not retry it.
	err = f.panel.Request(ctxT(t), f.name, member.CmdConfigure, map[string]any{"env": "minatar-breakout", "device": "cuda:0",
		"conv": []map[string]any{{"filters": 16, "kernel": 3, "stride": 1}}}, nil)
	if !errors.Is(err, rpc.ErrBadArguments) || !strings.Contains(err.Error(), errUnsupported.Error()) {
		t.Fatalf("configure of a conv network on a device without conv: %v, want bad_arguments naming %q", err, errUnsupported)
	}
	// A device that opens is opened on its ordinal; configuring again
	// closes the old backend.
	cfg := map[string]any{"env": env.CartPoleName, "device": "cuda:1", "seed": 2, "deterministic": true}
	f.configure(t, cfg)
	f.configure(t, cfg)
	if ordinal.Load() != 1 || opened.Load() != 2 || closed.Load() != 1 {
		t.Fatalf("opened %d backends on ordinal %d and closed %d, want 2 on 1 and 1 closed", opened.Load(), ordinal.Load(), closed.Load())
	}
	// It serves the policy's answers.
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 4, 5*time.Second)
	obs := cartPoleObs(7, 8)
	checkAnswers(t, mustRoundTrip(t, c, newWaiter(c), obs), localAnswers(t, cartPoleConfig(t, 2), 0, nil, obs))
	// Exiting closes the backend in use.
	f.do(t, member.CmdExit, nil, nil)
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if closed.Load() != 2 {
		t.Errorf("%d backends closed after exit, want 2", closed.Load())
	}
}
