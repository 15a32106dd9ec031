package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:  "ls",
		Usage: "list the workers of the trial with address and state",
		Flags: withGlobal(),
		Action: func(c *cli.Context) error {
			sess, err := openSession(c)
			if err != nil {
				return err
			}
			defer sess.Close()
			panel := sess.panel()
			defer panel.Close()
			ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
			defer cancel()
			workers, err := panel.Workers(ctx)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			if len(workers) == 0 {
				fmt.Fprintf(os.Stderr, "no workers in %s\n", sess.trial.Prefix())
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tADDRESS\tSTATE\tSINCE\tNOTE")
			for _, w := range workers {
				since := "-"
				if w.UpdatedMs > 0 {
					since = time.Since(w.Updated()).Round(time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Name, orDash(w.Address), w.State, since, w.Remark())
			}
			return tw.Flush()
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
