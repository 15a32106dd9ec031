package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
)

// CUDABinaryName is the name of rlctl built with the cuda tag (`make
// build-cuda`): the binary of the workers on a CUDA device.
const CUDABinaryName = "rlctl-cuda"

// DefaultCUDABinary is rlctl-cuda beside the running binary, or the running
// binary itself when it is rlctl-cuda: a user who runs bin/rlctl start
// finds bin/rlctl-cuda, and one who runs rlctl-cuda start needs no other.
func DefaultCUDABinary() string {
	exe, err := os.Executable()
	if err != nil {
		return CUDABinaryName // found through PATH, if anywhere
	}
	if filepath.Base(exe) == CUDABinaryName {
		return exe
	}
	return filepath.Join(filepath.Dir(exe), CUDABinaryName)
}

// usesCUDA reports whether a group's configuration names a CUDA device:
// "device: cuda:N" (or "cuda:{index}", one device per worker).
func usesCUDA(g experiment.Group) bool {
	d, _ := g.Config["device"].(string)
	return strings.HasPrefix(d, "cuda")
}

// DeviceError: a worker's device cannot be used where the workers run, so
// the trial was not started.
type DeviceError struct {
	Worker string // the first worker on the device
	Device string // "cuda:0"
	Binary string
	Reason string // one line: the CUDA error, or why the binary did not run
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("controller: %s (device %s): %s", e.Worker, e.Device, e.Reason)
}

// deviceCheckTimeout bounds one run of `rlctl-cuda devices`: the driver's
// initialisation takes a second or two on a large GPU.
const deviceCheckTimeout = 30 * time.Second

// CheckDevices runs `CUDABinary devices --require DEVICE,...` for the CUDA
// devices that opts's workers name, before anything starts, so that a
// machine without a usable GPU (no driver, no device, a device number
// beyond those present) or without rlctl-cuda fails the trial at once with
// one line naming the worker, the device and the cause. It is for workers
// that run on this machine (the local scheduler); on a cluster the nodes
// have the GPUs, and a worker that cannot open its device fails its
// configure instead.
func CheckDevices(ctx context.Context, opts Options) error {
	opts.setDefaults()
	first := map[string]string{} // device -> first worker on it
	var devices []string
	for _, group := range opts.Config.Groups() {
		g := opts.Config.Workers[group]
		if !usesCUDA(g) {
			continue
		}
		for i := range g.N() {
			d, _ := opts.Config.WorkerConfig(group, i)["device"].(string)
			if _, seen := first[d]; !seen {
				first[d] = names.WorkerName(group, i)
				devices = append(devices, d)
			}
		}
	}
	if len(devices) == 0 {
		return nil
	}
	fail := func(device, reason string) error {
		return &DeviceError{Worker: first[device], Device: device, Binary: opts.CUDABinary, Reason: reason}
	}
	bin, err := exec.LookPath(opts.CUDABinary)
	if err != nil {
		return fail(devices[0], fmt.Sprintf("needs %s, which is not there (%v): build it with `make build-cuda`, or give --cuda-binary",
			opts.CUDABinary, errors.Unwrap(err)))
	}
	ctx, cancel := context.WithTimeout(ctx, deviceCheckTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "devices", "--require", strings.Join(devices, ","))
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		// The last line of stderr is the binary's own word: the CUDA error,
		// a device number beyond those present, or the loader's
		// "libcuda.so.1: cannot open shared object file".
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		reason := strings.TrimSpace(lines[len(lines)-1])
		if reason == "" {
			reason = fmt.Sprintf("%s devices: %v", filepath.Base(bin), err)
		}
		// A device named "cuda:N: ..." in the line is the one at fault
		// (`devices --require` says which is not there); else the first.
		device, at := devices[0], len(reason)
		for _, d := range devices {
			if i := strings.Index(reason, d+": "); i >= 0 && i < at {
				device, at = d, i
			}
		}
		return fail(device, reason)
	}
	return nil
}
