package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/panel"
	"github.com/urfave/cli/v2"
	"github.com/vmihailenco/msgpack/v5"
)

func requestCommand() *cli.Command {
	return &cli.Command{
		Name:      "request",
		Usage:     "send one command to a live worker and print the reply as JSON",
		ArgsUsage: "WORKER COMMAND [key=value ...]",
		Description: "Values parse as JSON when they can (1, 2.5, true, [1,2], {\"a\":1}), else as strings.\n" +
			"A WORKER with a wildcard (echo/*; * alone is every worker) is a group request to every matching worker;\n" +
			"the reply is then a JSON object of worker -> reply (or {\"error\": ...}).\n" +
			"Example: rlctl request echo/0 echo msg=hello n=3",
		Flags: withGlobal(
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "how long to wait for the reply"},
		),
		Action: runRequest,
	}
}

func runRequest(c *cli.Context) error {
	if c.NArg() < 2 {
		return cli.Exit("usage: rlctl request WORKER COMMAND [key=value ...]", 2)
	}
	kwargs, err := parseKwargs(c.Args().Slice()[2:])
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	sess, err := openSession(c)
	if err != nil {
		return err
	}
	defer sess.Close()
	panel := sess.panel()
	defer panel.Close()

	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	name, command := c.Args().Get(0), c.Args().Get(1)
	if strings.ContainsAny(name, "*?[") {
		return groupRequest(ctx, panel, name, command, kwargs)
	}
	var raw msgpack.RawMessage
	if err := panel.Request(ctx, name, command, kwargs, &raw); err != nil {
		var re *rpc.Error
		if errors.As(err, &re) {
			return cli.Exit(fmt.Sprintf("%s %s: %s: %s", name, command, re.Type, re.Message), 1)
		}
		return cli.Exit(err.Error(), 1)
	}
	return printJSON(raw)
}

// groupRequest sends command to every worker whose name matches pattern.
func groupRequest(ctx context.Context, panel *panel.ControlPanel, pattern, command string, kwargs map[string]any) error {
	if _, err := path.Match(pattern, ""); err != nil {
		return cli.Exit(fmt.Sprintf("worker pattern %q: %v", pattern, err), 2)
	}
	all, err := panel.AutoConnect(ctx)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	var matched []string
	for _, w := range all {
		if ok, _ := path.Match(pattern, w); ok || pattern == "*" {
			matched = append(matched, w)
		}
	}
	if len(matched) == 0 {
		return cli.Exit(fmt.Sprintf("no live worker matches %q in %s", pattern, panel.Trial().Prefix()), 1)
	}
	out := make(map[string]any, len(matched))
	failed := 0
	for _, r := range panel.GroupRequest(ctx, matched, command, kwargs) {
		var v any
		if err := r.Decode(&v); err != nil {
			failed++
			out[r.Worker] = map[string]any{"error": err.Error()}
			continue
		}
		out[r.Worker] = jsonable(v)
	}
	if err := writeJSON(out); err != nil {
		return err
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d workers failed %s", failed, len(matched), command), 1)
	}
	return nil
}

// printJSON prints a msgpack value as indented JSON on stdout.
func printJSON(raw msgpack.RawMessage) error {
	var v any
	if err := msgpack.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	return writeJSON(jsonable(v))
}

func writeJSON(v any) error { return encodeJSON(os.Stdout, v) }

// encodeJSON writes v to w as indented JSON.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonable turns msgpack's map[any]any (non-string keys) into JSON-encodable maps.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}
