package worker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/distrl/distrl/rpc"
)

// DeviceCPU is the default device of a worker's "device" key.
const DeviceCPU = "cpu"

// ParseDevice splits a device name into its kind and ordinal: "" and "cpu"
// are the CPU, "cuda" is "cuda:0", "cuda:N" the CUDA device N.
func ParseDevice(s string) (kind string, ordinal int, err error) {
	if s == "" || s == DeviceCPU {
		return DeviceCPU, 0, nil
	}
	kind, num, hasNum := strings.Cut(s, ":")
	if kind != "cuda" {
		return "", 0, fmt.Errorf("device %q: want cpu, cuda or cuda:N", s)
	}
	if !hasNum {
		return kind, 0, nil
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return "", 0, fmt.Errorf("device %q: want cuda:N with N a device number (0, 1, ...)", s)
	}
	return kind, n, nil
}

// Accelerator resolves a worker's device against the accelerators its
// binary offers, by kind (the "cuda" of "cuda:0"): the zero T for the
// CPU, or what the kind's function makes of the ordinal. A malformed
// device, or one of a kind this binary cannot drive, is a bad_arguments
// error that says which binary can.
func Accelerator[T any](device string, kinds map[string]func(ordinal int) T) (T, error) {
	var zero T
	kind, ordinal, err := ParseDevice(device)
	if err != nil {
		return zero, rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	if kind == DeviceCPU {
		return zero, nil
	}
	open, ok := kinds[kind]
	if !ok {
		return zero, rpc.Errorf(rpc.ErrTypeBadArguments,
			"device %s: this binary has no %s support: run the worker with rlctl-%s (make build-%s)", device, kind, kind, kind)
	}
	return open(ordinal), nil
}
