package nameresolve_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
)

// A worker registers its address under the trial's key layout; a
// controller finds it, watches for changes and sees it go. The in-memory
// backend stands in for etcd (nameresolve/etcd), which passes the same
// conformance suite (nrtest).
func ExampleRepository() {
	var repo nameresolve.Repository = nameresolve.NewMemory()
	defer repo.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	trial := names.NewTrial("demo", "t1")

	events, err := repo.Watch(ctx, trial.WorkerPrefix())
	if err != nil {
		panic(err)
	}
	// A lease of 10 s: the record goes if the worker dies without Close.
	key := trial.Worker(names.WorkerName("echo", 0))
	if err := repo.Add(ctx, key, "127.0.0.1:40001", nameresolve.AddOptions{TTL: 10 * time.Second}); err != nil {
		panic(err)
	}
	// Without Replace, Add is create-only: a second echo/0 is refused.
	err = repo.Add(ctx, key, "127.0.0.1:40002", nameresolve.AddOptions{})
	fmt.Println(errors.Is(err, nameresolve.ErrKeyExists))

	addr, err := repo.Get(ctx, key)
	fmt.Println(addr, err)
	found, err := repo.Find(ctx, trial.WorkerPrefix())
	fmt.Println(len(found), found[0].Key, err)

	if err := repo.Delete(ctx, key); err != nil {
		panic(err)
	}
	for range 2 {
		ev := <-events
		fmt.Println(ev.Type, ev.Key)
	}
	// Output:
	// true
	// 127.0.0.1:40001 <nil>
	// 1 distrl/demo/t1/worker/echo/0 <nil>
	// put distrl/demo/t1/worker/echo/0
	// delete distrl/demo/t1/worker/echo/0
}
