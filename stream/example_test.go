package stream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/stream"
)

// The sample stream: a consumer (a trainer's side) binds and registers its
// address; a producer (an actor's side) finds it through name resolve and
// posts a batch of steps, which the consumer polls. Both sides are
// non-blocking: Post says ErrBackpressure when no consumer has room (or
// none is known yet), and the actor keeps the batch and posts it again.
func Example_samples() {
	repo := nameresolve.NewMemory() // etcd.Open in a real deployment
	defer repo.Close()
	trial := names.NewTrial("demo", "t1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	consumer, err := stream.NewSampleConsumer(ctx, stream.SampleConsumerOptions{
		Repo: repo, Trial: trial, Host: "127.0.0.1", Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer consumer.Close()
	producer, err := stream.NewSampleProducer(ctx, stream.SampleProducerOptions{Repo: repo, Trial: trial, Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer producer.Close()

	// Three steps of a 2-dimensional observation, the last ending an episode.
	b, err := api.NewSampleBuilder(2, 0, 3)
	if err != nil {
		panic(err)
	}
	b.ActorID, b.AgentID, b.Policy = "actor/0", "0", "default"
	for s := range 3 {
		if err := b.Append(api.StepRecord{Obs: []float32{float32(s), 1}, Action: api.Action{Discrete: 1},
			Reward: 1, Terminated: s == 2, LogProb: -0.7, Version: 4}); err != nil {
			panic(err)
		}
	}
	batch := b.Build(0)

	for {
		err := producer.Post(&batch)
		if err == nil {
			break
		}
		if !errors.Is(err, stream.ErrBackpressure) || ctx.Err() != nil {
			panic(err)
		}
		time.Sleep(time.Millisecond) // the consumer's address is still on its way
	}
	for {
		got, err := consumer.Poll(8)
		if err != nil {
			panic(err)
		}
		if len(got) > 0 {
			fmt.Println(got[0].ActorID, got[0].Len(), "steps, policy version", got[0].PolicyVersion)
			return
		}
		time.Sleep(time.Millisecond)
	}
	// Output:
	// actor/0 3 steps, policy version 4
}
