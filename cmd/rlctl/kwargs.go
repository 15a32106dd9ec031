package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// parseKwargs turns key=value arguments into kwargs. A value that parses as
// JSON is taken as such (integers stay integers), anything else is a string.
func parseKwargs(args []string) (map[string]any, error) {
	out := make(map[string]any, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want key=value", a)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("argument %q: key %q given twice", a, k)
		}
		out[k] = parseValue(v)
	}
	return out, nil
}

func parseValue(s string) any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return s
	}
	if _, err := dec.Token(); err != io.EOF {
		return s // more than one JSON value: take the text as it is
	}
	return numbers(v)
}

// numbers replaces json.Number with int64 where integral, else float64.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
