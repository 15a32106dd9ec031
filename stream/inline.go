package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/distrl/distrl/api"
	zmq "github.com/pebbe/zmq4"
)

// InlineInferenceClient runs an api.Policy in the calling goroutine. It has
// the methods of RemoteInferenceClient so an actor can use either; results
// are Ready right after the Flush that computed them.
type InlineInferenceClient struct {
	policy api.Policy
	obsDim int
	nextID ReqID
	reqs   requests
	qIDs   []ReqID
	qObs   []float32
	out    api.Inference
	shape  [2]int
	err    map[ReqID]error // why a failed request failed
}

// NewInlineInferenceClient returns a client that answers with p. obsDim is
// the length of every observation (0 takes it from the first Post).
func NewInlineInferenceClient(p api.Policy, obsDim int) *InlineInferenceClient {
	return &InlineInferenceClient{
		policy: p,
		obsDim: obsDim,
		err:    make(map[ReqID]error),
	}
}

// Post copies obs and queues it for the next Flush.
func (c *InlineInferenceClient) Post(obs []float32) (ReqID, error) {
	if c.obsDim <= 0 {
		c.obsDim = len(obs)
	}
	if len(obs) != c.obsDim || len(obs) == 0 {
		return 0, fmt.Errorf("stream: Post: observation has %d values, want %d", len(obs), c.obsDim)
	}
	c.nextID++
	c.reqs.add(c.nextID, request{state: reqQueued})
	c.qIDs = append(c.qIDs, c.nextID)
	c.qObs = append(c.qObs, obs...)
	return c.nextID, nil
}

// Flush runs the policy once on everything posted since the last Flush.
// If the policy fails, or answers with the wrong number of rows, every
// request of the batch fails (Consume wraps ErrInferenceFailed and the
// cause) and Flush returns the error too: a policy that cannot answer is a
// bug the actor should report rather than retry forever.
func (c *InlineInferenceClient) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := len(c.qIDs)
	if n == 0 {
		return nil
	}
	if c.policy == nil {
		return c.failAll(errors.New("no policy"))
	}
	c.shape[0], c.shape[1] = n, c.obsDim
	obs := api.Tensor[float32]{Shape: c.shape[:], Data: c.qObs}
	err := c.policy.Infer(obs, &c.out)
	if err == nil {
		err = checkInference(&c.out, n)
	}
	if err != nil {
		return c.failAll(err)
	}
	rows := rowsOf(&c.out)
	for i, id := range c.qIDs {
		if r := c.reqs.at(id); r != nil {
			r.state, r.result = reqDone, rows.at(i)
		}
	}
	c.qIDs, c.qObs = c.qIDs[:0], c.qObs[:0]
	return nil
}

func (c *InlineInferenceClient) failAll(cause error) error {
	err := fmt.Errorf("stream: inline policy: %w: %w", ErrInferenceFailed, cause)
	for _, id := range c.qIDs {
		if r := c.reqs.at(id); r != nil {
			r.state = reqFailed
		}
		c.err[id] = err
	}
	c.qIDs, c.qObs = c.qIDs[:0], c.qObs[:0]
	return err
}

// Poll has nothing to receive: results are ready after Flush.
func (c *InlineInferenceClient) Poll() error { return nil }

// Ready reports whether id has a result or has failed.
func (c *InlineInferenceClient) Ready(id ReqID) bool { return c.reqs.settled(id) }

// Consume takes the outcome of id, which must be Ready.
func (c *InlineInferenceClient) Consume(id ReqID) (InferenceResult, error) {
	return consume(&c.reqs, id, func(reqState) error {
		err := c.err[id]
		delete(c.err, id)
		return err
	})
}

// Warning is always "": the policy is in process.
func (c *InlineInferenceClient) Warning() string { return "" }

// Socket is nil: there is nothing to wait for.
func (c *InlineInferenceClient) Socket() *zmq.Socket { return nil }

// Close releases nothing; the policy belongs to the caller.
func (c *InlineInferenceClient) Close() error { return nil }
