package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// counter is a worker type written as echoworker is: it counts to the
// limit its configuration gives, a bounded slice per Poll, then completes.
type counter struct {
	cfg   counterConfig
	count int64
}

// counterConfig is the "configure" kwargs of a counter.
type counterConfig struct {
	Limit int64 `msgpack:"limit"`
	Step  int64 `msgpack:"step"`
}

// parseCounterConfig is the decode-and-validate half of Configure, which
// the type's Check shares: `rlctl start` refuses a bad configuration with
// it before anything starts.
func parseCounterConfig(args rpc.Args, _ int) (counterConfig, error) {
	cfg := counterConfig{Step: 1} // defaults first: absent keys keep them
	if err := worker.DecodeConfig(args, "counter config", &cfg); err != nil {
		return cfg, err
	}
	if cfg.Limit < 1 || cfg.Step < 1 {
		return cfg, rpc.Errorf(rpc.ErrTypeBadArguments, "counter config: limit %d, step %d: want >= 1", cfg.Limit, cfg.Step)
	}
	return cfg, nil
}

func (c *counter) Configure(_ context.Context, args rpc.Args) (err error) {
	c.cfg, err = parseCounterConfig(args, 0)
	return err
}

func (c *counter) Poll(context.Context) (worker.PollResult, error) {
	c.count = min(c.count+c.cfg.Step, c.cfg.Limit)
	return worker.PollResult{Samples: 1, Done: c.count == c.cfg.Limit}, nil
}

func (c *counter) Stats() map[string]any { return map[string]any{"count": c.count} }

func (c *counter) Close() error { return nil }

// counterType describes the type to the registry: its factory and its
// configuration check.
func counterType() worker.Type {
	return worker.Type{
		Name: "counter",
		New:  func(worker.Info) (worker.Impl, error) { return &counter{}, nil },
		Spec: member.Spec{Check: func(args rpc.Args, index int) error {
			_, err := parseCounterConfig(args, index)
			return err
		}},
	}
}

// A worker type of one's own: the counter above, registered, run as
// counter/0 and driven through a control panel until it completes.
func Example_workerType() {
	types := worker.NewRegistry()
	if err := types.Add(counterType()); err != nil {
		panic(err)
	}
	repo := nameresolve.NewMemory()
	defer repo.Close()
	trial := names.NewTrial("demo", "t1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := worker.New(ctx, worker.Options{Trial: trial, Registry: types, Type: "counter", Index: 0,
		Host: "127.0.0.1", Repo: repo, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	cp := panel.New(repo, trial, panel.Options{})
	defer cp.Close()
	if err := cp.Connect(ctx, "counter/0"); err != nil {
		panic(err)
	}
	// A misspelt key is refused, and the worker stays READY.
	err = cp.Request(ctx, "counter/0", member.CmdConfigure, map[string]any{"limt": 10}, nil)
	fmt.Println(err)
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart} {
		if err := cp.Request(ctx, "counter/0", cmd, map[string]any{"limit": 10, "step": 3}, nil); err != nil {
			panic(err)
		}
	}
	for {
		var st member.Status
		if err := cp.Request(ctx, "counter/0", member.CmdStatus, nil, &st); err != nil {
			panic(err)
		}
		if st.State == member.StateCompleted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var stats map[string]any
	if err := cp.Request(ctx, "counter/0", member.CmdStats, nil, &stats); err != nil {
		panic(err)
	}
	fmt.Println("count", stats["count"], "state", stats["state"])
	_ = cp.Request(ctx, "counter/0", member.CmdExit, nil, nil)
	<-done
	// Output:
	// counter/0 configure: bad_arguments: counter config: unknown key "limt" (known: limit, step)
	// count 10 state COMPLETED
}
