package replay_test

import (
	"fmt"

	"github.com/distrl/distrl/replay"
)

// A prioritized table: insert transitions with priorities, sample a batch
// with importance weights, and give the sampled items new priorities (the
// learner's |TD errors|), as a DQN trainer does through a replay worker.
func ExampleTable() {
	t, err := replay.NewTable(replay.Options{
		Name: "default", MaxSize: 1000, Sampler: replay.Prioritized, Remover: replay.RemoveFIFO,
		Alpha: 1, Beta: 0.4, Seed: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// One item of priority 1 and one of priority 99: the second is drawn
	// 99 times as often, and weighted down for it.
	low, _ := t.TryInsert(1, []byte("rare"))
	high, _ := t.TryInsert(99, []byte("common"))

	batch, err := t.TrySample(1000)
	if err != nil {
		fmt.Println(err)
		return
	}
	counts := map[uint64]int{}
	weights := map[uint64]float64{}
	for _, s := range batch {
		counts[s.ID]++
		weights[s.ID] = s.Weight
	}
	fmt.Printf("drawn: rare %d, common %d of %d\n", counts[low], counts[high], len(batch))
	fmt.Printf("weights: rare %.2f, common %.2f\n", weights[low], weights[high])

	// New priorities for what was sampled; an id evicted since is counted
	// as unknown, not an error.
	res, err := t.UpdatePriorities([]uint64{low, high, 12345}, []float64{50, 50, 1})
	fmt.Println(res.Updated, "updated,", res.Unknown, "unknown,", err)
	fmt.Println("size", t.Counters().Size, "inserts", t.Counters().Inserts)
	// Output:
	// drawn: rare 9, common 991 of 1000
	// weights: rare 1.00, common 0.16
	// 2 updated, 1 unknown, <nil>
	// size 2 inserts 2
}
