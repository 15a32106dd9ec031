package actorworker

import (
	"math/rand/v2"

	"github.com/distrl/distrl/stream"
)

// exploring is an inference client whose discrete actions are replaced by
// uniformly random ones with probability eps: epsilon-greedy over a
// deterministic (greedy) policy, as Ape-X's actors act. The replaced
// action is the one recorded and sent.
type exploring struct {
	stream.InferenceClient
	eps      float64
	nActions int
	rng      *rand.Rand
	random   int64 // actions replaced
}

func (e *exploring) Consume(id stream.ReqID) (stream.InferenceResult, error) {
	res, err := e.InferenceClient.Consume(id)
	if err == nil && e.rng.Float64() < e.eps {
		res.Action = int32(e.rng.IntN(e.nActions))
		e.random++
	}
	return res, err
}
