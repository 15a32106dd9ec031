package main

import (
	"reflect"
	"testing"
)

func TestParseKwargs(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    map[string]any
		wantErr bool
	}{
		{"empty", nil, map[string]any{}, false},
		{"int stays int", []string{"n=3"}, map[string]any{"n": int64(3)}, false},
		{"float", []string{"lr=2.5e-4"}, map[string]any{"lr": 2.5e-4}, false},
		{"bool", []string{"on=true"}, map[string]any{"on": true}, false},
		{"plain string", []string{"msg=hello"}, map[string]any{"msg": "hello"}, false},
		{"quoted string", []string{`msg="hi there"`}, map[string]any{"msg": "hi there"}, false},
		{"two json values is text", []string{"v=1 2"}, map[string]any{"v": "1 2"}, false},
		{"value with equals", []string{"expr=a=b"}, map[string]any{"expr": "a=b"}, false},
		{"empty value", []string{"x="}, map[string]any{"x": ""}, false},
		{"nested", []string{`cfg={"a":[1,2.5]}`}, map[string]any{"cfg": map[string]any{"a": []any{int64(1), 2.5}}}, false},
		{"no equals", []string{"oops"}, nil, true},
		{"empty key", []string{"=1"}, nil, true},
		{"duplicate key", []string{"a=1", "a=2"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseKwargs(c.args)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}
