package api

import (
	"errors"
	"fmt"
	"math"
)

// Numeric is the set of element types a [Tensor] can hold. The set is closed
// (no ~ approximations) because each type maps to exactly one wire dtype.
type Numeric interface {
	float32 | float64 | int32 | int64 | uint8
}

// MaxRank is the largest number of dimensions a Tensor may have. It bounds
// what a decoder allocates for a shape read from the network.
const MaxRank = 32

// Tensor is a dense, row-major (C order) n-dimensional array.
//
// The zero Tensor has no shape and no data; it means "absent" and is what
// optional fields of [SampleBatch] and [Inference] hold when unused. A
// Tensor with an empty but non-nil Shape is a scalar with one element.
type Tensor[T Numeric] struct {
	Shape []int
	Data  []T
}

// NewTensor returns a zero-filled tensor of the given shape.
//
// If the shape is invalid (a negative dimension or an element count that
// overflows int), NewTensor does not panic: it returns a tensor with that
// shape and nil Data, which [Tensor.Validate] and the encoder reject.
func NewTensor[T Numeric](shape ...int) Tensor[T] {
	s := append([]int{}, shape...)
	n, err := numElements(s, 1)
	if err != nil {
		return Tensor[T]{Shape: s}
	}
	return Tensor[T]{Shape: s, Data: make([]T, n)}
}

// FromSlice wraps data (without copying) in a tensor of the given shape.
// With no shape it returns a 1-D tensor of len(data) elements.
func FromSlice[T Numeric](data []T, shape ...int) (Tensor[T], error) {
	if len(shape) == 0 {
		shape = []int{len(data)}
	} else {
		shape = append([]int{}, shape...)
	}
	t := Tensor[T]{Shape: shape, Data: data}
	if err := t.Validate(); err != nil {
		return Tensor[T]{}, err
	}
	return t, nil
}

// Len returns the number of elements, len(t.Data).
func (t Tensor[T]) Len() int { return len(t.Data) }

// IsZero reports whether t is the zero (absent) tensor. msgpack's omitempty
// also uses it.
func (t Tensor[T]) IsZero() bool { return t.Shape == nil && len(t.Data) == 0 }

// Row returns row i of a 2-D tensor as a sub-slice of t.Data (not a copy).
// It returns nil if t is not 2-D or i is out of range.
func (t Tensor[T]) Row(i int) []T {
	if len(t.Shape) != 2 || i < 0 || i >= t.Shape[0] {
		return nil
	}
	w := t.Shape[1]
	if (i+1)*w > len(t.Data) {
		return nil // inconsistent tensor; refuse rather than panic
	}
	return t.Data[i*w : (i+1)*w : (i+1)*w]
}

// Resize sets t's shape, reusing t.Data's backing array when it is large
// enough. Element values are unspecified afterwards; callers overwrite them.
// It lets a producer fill the same output tensor batch after batch without
// allocating.
func (t *Tensor[T]) Resize(shape ...int) error {
	n, err := numElements(shape, 1)
	if err != nil {
		return err
	}
	if t.Shape != nil && cap(t.Shape) >= len(shape) { // non-nil even for a scalar
		t.Shape = t.Shape[:len(shape)]
	} else {
		t.Shape = make([]int, len(shape))
	}
	copy(t.Shape, shape)
	if cap(t.Data) >= n {
		t.Data = t.Data[:n]
	} else {
		t.Data = make([]T, n)
	}
	return nil
}

// Validate reports whether the shape is well formed and matches the data.
// The zero tensor is valid.
func (t Tensor[T]) Validate() error {
	if t.IsZero() {
		return nil
	}
	if t.Shape == nil {
		return fmt.Errorf("tensor has %d elements but no shape", len(t.Data))
	}
	n, err := numElements(t.Shape, 1)
	if err != nil {
		return err
	}
	if n != len(t.Data) {
		return fmt.Errorf("tensor shape %v needs %d elements, has %d", t.Shape, n, len(t.Data))
	}
	return nil
}

var errShapeOverflow = errors.New("tensor shape overflows")

// numElements returns prod(shape), checking that the rank is at most
// MaxRank, every dimension is in [0, MaxInt32], and prod(shape)*itemSize
// fits in an int (so the byte length of the data is representable too).
func numElements(shape []int, itemSize int) (int, error) {
	if len(shape) > MaxRank {
		return 0, fmt.Errorf("tensor rank %d exceeds the maximum %d", len(shape), MaxRank)
	}
	limit := math.MaxInt / itemSize
	n := 1
	for _, d := range shape {
		if d < 0 || d > math.MaxInt32 {
			// MaxInt32 keeps products within int on 32-bit hosts too and
			// matches what the decoder accepts; no real dimension is larger.
			return 0, fmt.Errorf("tensor shape %v has a dimension out of range", shape)
		}
		if d != 0 && n > limit/d {
			// Rejected even if a later dimension is 0: no real array has
			// such a shape, so it can only come from a bug or an attacker.
			return 0, fmt.Errorf("%w: %v", errShapeOverflow, shape)
		}
		n *= d
	}
	return n, nil
}
