package api

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestSpaceValidate(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	tests := []struct {
		name string
		s    Space
		ok   bool
		size int
		dim  int
	}{
		{"discrete", NewDiscrete(5), true, 1, 5},
		{"discrete zero", NewDiscrete(0), false, 1, 0},
		{"box", NewBox(-1, 1, 2, 3), true, 6, 6},
		{"box unbounded", NewBox(-inf, inf, 4), true, 4, 4},
		{"box scalar", NewBox(0, 1), true, 1, 1},
		{"box negative dim", NewBox(0, 1, -2), false, 0, 0},
		{"box low > high", NewBox(1, 0, 2), false, 2, 2},
		{"box NaN bound", NewBox(nan, 0, 2), false, 2, 2},
		{"box wrong bound count", Space{Kind: Box, Shape: []int{3}, Low: []float32{0}, High: []float32{1}}, false, 3, 3},
		{"zero space", Space{}, false, 0, 0},
		{"unknown kind", Space{Kind: 9}, false, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.s.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if got := tc.s.Size(); got != tc.size {
				t.Errorf("Size() = %d, want %d", got, tc.size)
			}
			if got := tc.s.Dim(); got != tc.dim {
				t.Errorf("Dim() = %d, want %d", got, tc.dim)
			}
		})
	}
}

func TestSpaceCheckAction(t *testing.T) {
	box := NewBox(-1, 1, 2)
	tests := []struct {
		name string
		s    Space
		a    Action
		ok   bool
	}{
		{"discrete in range", NewDiscrete(3), Action{Discrete: 2}, true},
		{"discrete too big", NewDiscrete(3), Action{Discrete: 3}, false},
		{"discrete negative", NewDiscrete(3), Action{Discrete: -1}, false},
		{"box inside", box, Action{Continuous: []float32{-1, 0.5}}, true},
		{"box outside", box, Action{Continuous: []float32{0, 1.5}}, false},
		{"box NaN", box, Action{Continuous: []float32{0, float32(math.NaN())}}, false},
		{"box wrong length", box, Action{Continuous: []float32{0}}, false},
		{"box missing", box, Action{Discrete: 1}, false},
		{"invalid space", Space{}, Action{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.CheckAction(tc.a)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckAction(%+v) = %v, want ok=%v", tc.a, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidAction) {
				t.Errorf("error %v does not wrap ErrInvalidAction", err)
			}
		})
	}
}

func TestSpaceMsgpack(t *testing.T) {
	for _, s := range []Space{NewDiscrete(4), NewBox(-2, 3, 2, 2)} {
		b, err := msgpack.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got Space
		if err := msgpack.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("round trip: got %+v, want %+v", got, s)
		}
	}
	if got := Box.String(); got != "Box" {
		t.Errorf("Box.String() = %q", got)
	}
}
