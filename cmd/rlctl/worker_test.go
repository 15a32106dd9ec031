package main

import (
	"slices"
	"testing"
)

func TestParseWith(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want []companion
		bad  bool
	}{
		{nil, nil, false},
		{[]string{"policy"}, []companion{{"policy", "policy"}}, false},
		{[]string{"red=policy", "sink"}, []companion{{"red", "policy"}, {"sink", "sink"}}, false},
		{[]string{""}, nil, true},
		{[]string{"=policy"}, nil, true},
		{[]string{"policy/0"}, nil, true},
		{[]string{"a b"}, nil, true},
	} {
		got, err := parseWith(tt.in)
		if (err != nil) != tt.bad || !slices.Equal(got, tt.want) {
			t.Errorf("parseWith(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}
