package actorworker

// batchEnd says what happens to an agent's batch after a step is recorded.
type batchEnd int

const (
	// keepFilling: the batch goes on with the next step.
	keepFilling batchEnd = iota
	// sendNow: the episode terminated (and the batch ends with it, or is
	// full); the batch is complete with a bootstrap value of 0, since
	// nothing follows a terminal state.
	sendNow
	// awaitBootstrap: the batch ends here but the trajectory goes on (a
	// time limit, or a cut every sample_steps steps), so its return must be
	// bootstrapped from the value of the observation after the last step.
	// That value comes with the next inference result for the agent: the
	// next ordinary request after a cut, or one extra request for the final
	// observation after a truncation.
	awaitBootstrap
)

func (e batchEnd) String() string {
	switch e {
	case keepFilling:
		return "keep filling"
	case sendNow:
		return "send now"
	case awaitBootstrap:
		return "await bootstrap"
	}
	return "unknown"
}

// batchEndAfter holds the bootstrap rules in one place: what to do with a
// batch of length steps (including the one just recorded) whose last step
// terminated or was truncated, when batches hold sampleSteps steps.
// Termination wins over truncation, as in api.Step.
//
// With span (the actor's span_episodes), a termination ends the batch only
// when it is full: the next episode's steps follow in the same batch (a
// learner cuts returns at Terminated steps), so an actor of short episodes
// sends batches of sampleSteps steps, not one per episode. A truncation
// always ends it, since the value of the observation after it must be the
// batch's bootstrap value.
func batchEndAfter(terminated, truncated bool, length, sampleSteps int, span bool) batchEnd {
	switch {
	case terminated && span && length < sampleSteps:
		return keepFilling
	case terminated:
		return sendNow
	case truncated, length >= sampleSteps:
		return awaitBootstrap
	}
	return keepFilling
}
