package api

import (
	"errors"
	"fmt"
	"math"
)

// SpaceKind says which family a [Space] belongs to.
type SpaceKind int

const (
	// Discrete spaces hold one integer in [0, N).
	Discrete SpaceKind = iota + 1
	// Box spaces hold a float32 array of a fixed shape with per-element
	// bounds.
	Box
)

func (k SpaceKind) String() string {
	switch k {
	case Discrete:
		return "Discrete"
	case Box:
		return "Box"
	}
	return fmt.Sprintf("SpaceKind(%d)", int(k))
}

// Space describes the observations or actions of an environment, following
// Gym's Discrete and Box. The zero SpaceKind is deliberately invalid so an
// unset Space fails [Space.Validate].
type Space struct {
	Kind SpaceKind `msgpack:"kind"`
	// N is the number of choices of a Discrete space.
	N int `msgpack:"n,omitempty"`
	// Shape, Low and High describe a Box space. Low and High hold one bound
	// per element (len == Size()), flattened in row-major order; ±Inf means
	// unbounded.
	Shape []int     `msgpack:"shape,omitempty"`
	Low   []float32 `msgpack:"low,omitempty"`
	High  []float32 `msgpack:"high,omitempty"`
}

// NewDiscrete returns the space of integers in [0, n).
func NewDiscrete(n int) Space { return Space{Kind: Discrete, N: n} }

// NewBox returns a Box space of the given shape whose every element lies in
// [low, high]. Use ±Inf for unbounded elements, or set Low and High directly
// for per-element bounds.
func NewBox(low, high float32, shape ...int) Space {
	s := Space{Kind: Box, Shape: append([]int{}, shape...)}
	n, err := numElements(s.Shape, 4)
	if err != nil {
		return s // Validate reports the bad shape
	}
	s.Low = make([]float32, n)
	s.High = make([]float32, n)
	for i := range n {
		s.Low[i], s.High[i] = low, high
	}
	return s
}

// Size returns the number of scalars in one element of the space: 1 for a
// Discrete space (a single integer), prod(Shape) for a Box space. It is the
// width of an observation vector, or of a continuous action.
func (s Space) Size() int {
	switch s.Kind {
	case Discrete:
		return 1
	case Box:
		n, err := numElements(s.Shape, 4)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

// Dim returns the width of a network layer facing the space: N for a
// Discrete space (one logit or one-hot slot per choice), prod(Shape) for a
// Box space (the same as Size).
func (s Space) Dim() int {
	if s.Kind == Discrete {
		return s.N
	}
	return s.Size()
}

// Validate reports whether the space is well formed.
func (s Space) Validate() error {
	switch s.Kind {
	case Discrete:
		if s.N < 1 {
			return fmt.Errorf("api: Discrete space needs N >= 1, has %d", s.N)
		}
		return nil
	case Box:
		n, err := numElements(s.Shape, 4)
		if err != nil {
			return fmt.Errorf("api: Box space: %w", err)
		}
		if len(s.Low) != n || len(s.High) != n {
			return fmt.Errorf("api: Box space of shape %v needs %d bounds, has %d low and %d high",
				s.Shape, n, len(s.Low), len(s.High))
		}
		for i := range n {
			lo, hi := s.Low[i], s.High[i]
			if isNaN32(lo) || isNaN32(hi) || lo > hi {
				return fmt.Errorf("api: Box space element %d has bounds [%v, %v]", i, lo, hi)
			}
		}
		return nil
	}
	return fmt.Errorf("api: invalid space kind %v", s.Kind)
}

// Contains reports whether x is an element of a Box space: the right length,
// no NaN, and every value within its bounds. It is false for Discrete spaces.
func (s Space) Contains(x []float32) bool {
	if s.Kind != Box || len(x) != len(s.Low) || len(x) != len(s.High) {
		return false
	}
	for i, v := range x {
		if isNaN32(v) || v < s.Low[i] || v > s.High[i] {
			return false
		}
	}
	return true
}

// ErrInvalidAction is wrapped by the errors of [Space.CheckAction], so
// callers can tell a bad action from other failures of Env.Step.
var ErrInvalidAction = errors.New("invalid action")

// CheckAction reports whether a is a valid action in s: Discrete in [0, N)
// for a Discrete space, Continuous in the bounds for a Box space. The field
// the space does not use is ignored.
func (s Space) CheckAction(a Action) error {
	switch s.Kind {
	case Discrete:
		if a.Discrete < 0 || int(a.Discrete) >= s.N {
			return fmt.Errorf("api: %w: %d is outside Discrete(%d)", ErrInvalidAction, a.Discrete, s.N)
		}
		return nil
	case Box:
		if !s.Contains(a.Continuous) {
			return fmt.Errorf("api: %w: %v is outside the Box space of shape %v", ErrInvalidAction, a.Continuous, s.Shape)
		}
		return nil
	}
	return fmt.Errorf("api: %w: space kind %v", ErrInvalidAction, s.Kind)
}

func isNaN32(v float32) bool { return math.IsNaN(float64(v)) }
