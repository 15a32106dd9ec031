package main

import (
	"fmt"
	"strings"

	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker"
	"github.com/urfave/cli/v2"
)

// accelerator is what a build of rlctl can run policies and trainers on
// besides the CPU: rlctl has none (accel_cpu.go), rlctl-cuda has CUDA
// (accel_cuda.go).
type accelerator struct {
	// kind is the device kind ("cuda"), "" for none.
	kind string
	// devices lists the devices the driver sees, one line each.
	devices func() ([]string, error)
	// policy opens policy backends on them, trainer learners' engines.
	policy  policyworker.Devices
	trainer trainerworker.Engines
}

func devicesCommand() *cli.Command {
	return &cli.Command{
		Name:  "devices",
		Usage: "list the GPUs this binary can run policy and trainer workers on (rlctl-cuda; rlctl has none)",
		Description: "Prints one line per CUDA device. With --require it fails, with one line on stderr, unless every\n" +
			"named device is present: `rlctl start` runs it before starting workers on a CUDA device.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "require", Usage: "comma-separated devices that must be present, such as cuda:0,cuda:1"},
		},
		Action: runDevices,
	}
}

func runDevices(c *cli.Context) error {
	if accel.kind == "" {
		return cli.Exit("this rlctl has no GPU support: build rlctl-cuda with `make build-cuda` (docs/gpu.md)", exitFailed)
	}
	list, err := accel.devices()
	if err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	for _, d := range list {
		fmt.Fprintln(c.App.Writer, d)
	}
	for _, want := range strings.Split(c.String("require"), ",") {
		if want = strings.TrimSpace(want); want == "" {
			continue
		}
		kind, n, err := worker.ParseDevice(want)
		if err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
		if kind != accel.kind || n >= len(list) {
			return cli.Exit(fmt.Sprintf("%s: not present: the driver sees %d %s devices (%s)",
				want, len(list), accel.kind, strings.Join(list, "; ")), exitFailed)
		}
	}
	return nil
}
