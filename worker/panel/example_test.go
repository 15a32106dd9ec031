package panel_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// Two echo workers run in this process, as they would in two; a
// ControlPanel finds them through name resolve and drives them: one
// request, then a group request to both.
func ExampleControlPanel() {
	repo := nameresolve.NewMemory() // etcd.Open in a real deployment
	defer repo.Close()
	trial := names.NewTrial("demo", "t1")
	types := worker.NewRegistry()
	if err := types.Register(echoworker.TypeName, echoworker.New); err != nil {
		panic(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var running []chan error
	for i := range 2 {
		w, err := worker.New(ctx, worker.Options{
			Trial: trial, Registry: types, Type: echoworker.TypeName, Index: i,
			Host: "127.0.0.1", Repo: repo, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			panic(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		running = append(running, done)
	}

	cp := panel.New(repo, trial, panel.Options{})
	defer cp.Close()
	workers := []string{"echo/0", "echo/1"}
	if err := cp.Connect(ctx, workers...); err != nil {
		panic(err)
	}

	var st member.Status
	if err := cp.Request(ctx, "echo/0", member.CmdStatus, nil, &st); err != nil {
		panic(err)
	}
	fmt.Println(st.Name, st.State)

	for _, r := range cp.GroupRequest(ctx, workers, "echo", map[string]string{"msg": "hi"}) {
		var reply map[string]string
		err := r.Decode(&reply)
		fmt.Println(r.Worker, reply["msg"], err)
	}

	for _, r := range cp.GroupRequest(ctx, workers, member.CmdExit, nil) {
		fmt.Println(r.Worker, "exit:", r.Err)
	}
	for _, done := range running {
		<-done
	}
	// Output:
	// echo/0 READY
	// echo/0 hi <nil>
	// echo/1 hi <nil>
	// echo/0 exit: <nil>
	// echo/1 exit: <nil>
}
