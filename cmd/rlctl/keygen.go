package main

import (
	"fmt"

	"github.com/distrl/distrl/rpc"
	"github.com/urfave/cli/v2"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:      "keygen",
		Usage:     "write a new CurveZMQ key pair for an experiment (use it with --curve-keys)",
		ArgsUsage: "FILE",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("usage: rlctl keygen FILE", 2)
			}
			kp, err := rpc.NewCurveKeyPair()
			if err != nil {
				return err
			}
			if err := rpc.WriteCurveKeyFile(c.Args().First(), kp); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			fmt.Printf("wrote %s (public key %s)\n", c.Args().First(), kp.Public)
			return nil
		},
	}
}
