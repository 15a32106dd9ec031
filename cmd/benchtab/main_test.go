package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/distrl/distrl/rpc
BenchmarkRawREQREP-2   	   10000	    100000 ns/op	     10000 req/s	        95.0 p50-us
BenchmarkClientRequest-2	   10000	    125000 ns/op	      8000 req/s
pkg: github.com/distrl/distrl/worker/panel
BenchmarkGroupRequest/64-2      	     200	   2419648 ns/op	         2.0 p50-ms
BenchmarkSequentialRequests/64-2	     200	   3248013 ns/op	         3.0 p50-ms
pkg: github.com/distrl/distrl/e2e
BenchmarkPipeline/ring=8-2   	       1	         0.3036 actor-busy	         8.000 rows/infer	     37163 steps/s	       0 B/op	       0 allocs/op
BenchmarkSingleLoopLimit/ring=8-2         	  143947	      8619 ns/op	    116026 steps/s	      49 B/op	       1 allocs/op
PASS
`

func TestParseAndWrite(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]float64{
		"rpc.BenchmarkRawREQREP req/s":          10000,
		"rpc.BenchmarkRawREQREP p50-us":         95,
		"panel.BenchmarkGroupRequest/64 p50-ms": 2,
		"rpc.BenchmarkClientRequest ns/op":      125000,
		// A pipeline benchmark reports no ns/op; its metrics start at once.
		"e2e.BenchmarkPipeline/ring=8 steps/s":          37163,
		"e2e.BenchmarkPipeline/ring=8 rows/infer":       8,
		"e2e.BenchmarkSingleLoopLimit/ring=8 steps/s":   116026,
		"e2e.BenchmarkSingleLoopLimit/ring=8 allocs/op": 1,
	}
	for k, want := range cases {
		if res[k] != want {
			t.Errorf("%s = %v, want %v", k, res[k], want)
		}
	}
	res["e2e.BenchmarkStartupEcho/workers=4096/per_process=256 startup-s"] = 8
	var out strings.Builder
	write(&out, res)
	for _, want := range []string{"0.80x", "1.50x", "0.32x", "not measured", "10 startup-s (bar)", "1.25x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRowsNameBenchmarks checks that every key of the table names a
// benchmark function that exists, in a package of that name, so that a
// renamed benchmark shows here rather than as a silent "not measured".
// (Sub-benchmark names and metrics are only known by running them.)
func TestRowsNameBenchmarks(t *testing.T) {
	root := filepath.Join("..", "..")
	// package name (the last element of its path) -> contents of its _test.go files
	sources := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.Base(filepath.Dir(path))
		sources[pkg] += string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`^([a-z0-9_]+)\.(Benchmark[A-Za-z0-9_]+)(/[^ ]+)? [^ ]+$`)
	for _, r := range rows {
		for _, k := range []string{r.measured, r.limit} {
			if _, fixed := bar(k); k == "" || fixed {
				continue
			}
			m := key.FindStringSubmatch(k)
			if m == nil {
				t.Errorf("row %q: key %q is not \"pkg.BenchmarkName[/sub] metric\"", r.title, k)
				continue
			}
			decl := regexp.MustCompile(`func ` + m[2] + `\(b \*testing\.B\)`)
			if !decl.MatchString(sources[m[1]]) {
				t.Errorf("row %q: no %s in a package named %s", r.title, m[2], m[1])
			}
		}
	}
}
