package api

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// AppendBatch returns a batch of a's environments followed by b's: index
// a.Len()+i is b's environment i. The two must have equal spaces and
// agents. a stays valid on its own (a ring that grows keeps its first
// targets on it), but the result owns both: its Close closes a and b.
// Run runs each part's calls in turn, a's first.
func AppendBatch(a, b EnvBatch) (EnvBatch, error) {
	if !reflect.DeepEqual(a.ObservationSpace(), b.ObservationSpace()) ||
		!reflect.DeepEqual(a.ActionSpace(), b.ActionSpace()) ||
		!slices.Equal(a.Agents(), b.Agents()) {
		return nil, errors.New("api: AppendBatch: the batches' spaces or agents differ")
	}
	var parts []EnvBatch
	if j, ok := a.(*joinedBatch); ok {
		parts = append(slices.Clip(j.parts), b) // a's own parts are left as they are
	} else {
		parts = []EnvBatch{a, b}
	}
	j := &joinedBatch{parts: parts}
	for _, p := range parts {
		j.offsets = append(j.offsets, j.n)
		j.n += p.Len()
	}
	return j, nil
}

// joinedBatch is AppendBatch's result.
type joinedBatch struct {
	parts   []EnvBatch
	offsets []int // parts[i]'s first index
	n       int
	// Scratch for Run: one part's calls, and where each came from.
	resets          []EnvReset
	steps           []EnvStep
	resetAt, stepAt []int
}

func (j *joinedBatch) Len() int                { return j.n }
func (j *joinedBatch) ObservationSpace() Space { return j.parts[0].ObservationSpace() }
func (j *joinedBatch) ActionSpace() Space      { return j.parts[0].ActionSpace() }
func (j *joinedBatch) Agents() []string        { return j.parts[0].Agents() }

// Run gives each part the calls for its environments, renumbered, and
// copies their results back.
func (j *joinedBatch) Run(ctx context.Context, resets []EnvReset, steps []EnvStep) error {
	for _, r := range resets {
		if r.Env < 0 || r.Env >= j.n {
			return fmt.Errorf("api: reset of environment %d of %d", r.Env, j.n)
		}
	}
	for _, s := range steps {
		if s.Env < 0 || s.Env >= j.n {
			return fmt.Errorf("api: step of environment %d of %d", s.Env, j.n)
		}
	}
	for p, part := range j.parts {
		lo, hi := j.offsets[p], j.offsets[p]+part.Len()
		j.resets, j.steps, j.resetAt, j.stepAt = j.resets[:0], j.steps[:0], j.resetAt[:0], j.stepAt[:0]
		for i, r := range resets {
			if r.Env >= lo && r.Env < hi {
				r.Env -= lo
				j.resets, j.resetAt = append(j.resets, r), append(j.resetAt, i)
			}
		}
		for i, s := range steps {
			if s.Env >= lo && s.Env < hi {
				s.Env -= lo
				j.steps, j.stepAt = append(j.steps, s), append(j.stepAt, i)
			}
		}
		if len(j.resets)+len(j.steps) == 0 {
			continue
		}
		if err := part.Run(ctx, j.resets, j.steps); err != nil {
			return err
		}
		for k, i := range j.resetAt {
			resets[i].Obs, resets[i].Acting = j.resets[k].Obs, j.resets[k].Acting
		}
		for k, i := range j.stepAt {
			steps[i].Result = j.steps[k].Result
		}
	}
	return nil
}

// InfoMeans averages the parts' means (those that report them, as a
// Python host does), each weighed by its environments.
func (j *joinedBatch) InfoMeans() map[string]float64 {
	sums, weights := map[string]float64{}, map[string]float64{}
	for _, p := range j.parts {
		r, ok := p.(interface{ InfoMeans() map[string]float64 })
		if !ok {
			continue
		}
		for k, v := range r.InfoMeans() {
			sums[k] += v * float64(p.Len())
			weights[k] += float64(p.Len())
		}
	}
	for k := range sums {
		sums[k] /= weights[k]
	}
	return sums
}

// Close closes every part.
func (j *joinedBatch) Close() error {
	var errs []error
	for _, p := range j.parts {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
