package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distrl/distrl/experiment"
)

// cudaConfig is cartpole-ppo-cuda with the policy group's device and count
// replaced.
func cudaConfig(t *testing.T, device string, policies int) *experiment.Config {
	t.Helper()
	cfg, err := experiment.Builtin("cartpole-ppo-cuda")
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Workers["policy"]
	g.Count = experiment.Count(policies)
	g.Config["device"] = device
	cfg.Workers["policy"] = g
	return cfg
}

// fakeCUDABinary writes a script that stands in for rlctl-cuda's `devices`
// command: it records its arguments in args.txt and, when reason is not
// empty, says it on stderr and exits 3 as rlctl-cuda does.
func fakeCUDABinary(t *testing.T, reason string) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	bin, argsFile = filepath.Join(dir, "rlctl-cuda"), filepath.Join(dir, "args.txt")
	script := "#!/bin/sh\necho \"$@\" > " + argsFile + "\n"
	if reason != "" {
		script += "echo 'some noise' >&2\necho '" + reason + "' >&2\nexit 3\n"
	}
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestCheckDevices(t *testing.T) {
	ok, _ := fakeCUDABinary(t, "")
	noGPU, _ := fakeCUDABinary(t, "rlctl-cuda: CUDA unavailable: cuInit: no CUDA-capable device is detected (CUDA_ERROR_NO_DEVICE)")
	second, _ := fakeCUDABinary(t, "rlctl-cuda: cuda:1: not present: the driver sees 1 cuda devices (cuda:0 X)")
	tests := []struct {
		name     string
		device   string
		policies int
		binary   string
		worker   string // of the DeviceError; "" for no error
		dev      string
		reason   string
	}{
		{"cpu: no check, no binary needed", "cpu", 1, "/nonexistent/rlctl-cuda", "", "", ""},
		{"binary missing", "cuda:0", 1, "/nonexistent/rlctl-cuda", "policy/0", "cuda:0", "needs /nonexistent/rlctl-cuda, which is not there"},
		{"devices present", "cuda:0", 1, ok, "", "", ""},
		{"no GPU: the binary's last line", "cuda:0", 1, noGPU, "policy/0", "cuda:0", "CUDA unavailable: cuInit: no CUDA-capable device"},
		{"one device per worker: the missing one named", "cuda:{index}", 2, second, "policy/1", "cuda:1", "cuda:1: not present"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDevices(context.Background(), Options{Config: cudaConfig(t, tt.device, tt.policies), CUDABinary: tt.binary})
			if tt.worker == "" {
				if err != nil {
					t.Fatalf("CheckDevices: %v", err)
				}
				return
			}
			var de *DeviceError
			if !errors.As(err, &de) || de.Worker != tt.worker || de.Device != tt.dev || !strings.Contains(de.Reason, tt.reason) {
				t.Fatalf("CheckDevices: %v; want a DeviceError for %s on %s saying %q", err, tt.worker, tt.dev, tt.reason)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "noise") {
				t.Errorf("not one line, or not the last: %q", err)
			}
		})
	}
}

// TestCheckDevicesRequiresEach: every device the workers name is asked
// for, once.
func TestCheckDevicesRequiresEach(t *testing.T) {
	bin, args := fakeCUDABinary(t, "")
	if err := CheckDevices(context.Background(), Options{Config: cudaConfig(t, "cuda:{index}", 3), CUDABinary: bin}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	if want := "devices --require cuda:0,cuda:1,cuda:2\n"; string(got) != want {
		t.Errorf("rlctl-cuda got %q, want %q", got, want)
	}
}

// TestGroupSpecsCUDABinary: the groups on a CUDA device run the CUDA
// binary, the others the scheduler's own.
func TestGroupSpecsCUDABinary(t *testing.T) {
	cfg := cudaConfig(t, "cuda:0", 1)
	dir := TrialDir(t.TempDir())
	for _, specs := range groupSpecs(cfg, dir, nil, nil, "/opt/rlctl-cuda") {
		for _, s := range specs {
			want := ""
			if s.Type == "policy" {
				want = "/opt/rlctl-cuda"
			}
			if s.Executable != want {
				t.Errorf("%s: executable %q, want %q", s.Name, s.Executable, want)
			}
		}
	}
}
