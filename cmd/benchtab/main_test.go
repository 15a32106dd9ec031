package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/distrl/distrl/rpc
BenchmarkRawREQREP-2   	   10000	    100000 ns/op	     10000 req/s	        95.0 p50-us
BenchmarkClientRequest-2	   10000	    125000 ns/op	      8000 req/s
pkg: github.com/distrl/distrl/worker
BenchmarkGroupRequest/64-2      	     200	   2419648 ns/op	         2.0 p50-ms
BenchmarkSequentialRequests/64-2	     200	   3248013 ns/op	         3.0 p50-ms
PASS
`

func TestParseAndWrite(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]float64{
		"rpc.BenchmarkRawREQREP req/s":           10000,
		"rpc.BenchmarkRawREQREP p50-us":          95,
		"worker.BenchmarkGroupRequest/64 p50-ms": 2,
		"rpc.BenchmarkClientRequest ns/op":       125000,
	}
	for k, want := range cases {
		if res[k] != want {
			t.Errorf("%s = %v, want %v", k, res[k], want)
		}
	}
	var out strings.Builder
	write(&out, res)
	for _, want := range []string{"0.80x", "1.50x", "not measured"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
