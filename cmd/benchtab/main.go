// Command benchtab reads `go test -bench` output on stdin and prints the
// table of `make bench`: each measured figure beside the limit measured in
// the same run, and their ratio.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// row pairs a measured figure with its limit (none: limit is ""). Keys are "pkg.Benchmark metric",
// pkg being the last element of the import path.
type row struct {
	title    string
	measured string
	limit    string
	// higherIsBetter: the ratio is measured/limit for throughputs and
	// limit/measured for times, so 1.0 always means "as fast as the limit".
	higherIsBetter bool
}

var rows = []row{
	{"control-panel request vs raw REQ/REP (round trips/s)", "worker.BenchmarkPanelRequest ops/s", "rpc.BenchmarkRawREQREP req/s", true},
	{"rpc client request vs raw REQ/REP (round trips/s)", "rpc.BenchmarkClientRequest req/s", "rpc.BenchmarkRawREQREP req/s", true},
	{"rpc Do, 64 in flight vs raw DEALER/ROUTER pipelined (req/s)", "rpc.BenchmarkDo64 req/s", "rpc.BenchmarkRawDealerRouterPipelined req/s", true},
	{"group request to 64 workers vs 64 sequential (median ms)", "worker.BenchmarkGroupRequest/64 p50-ms", "worker.BenchmarkSequentialRequests/64 p50-ms", false},
	{"group request to 256 workers vs 256 sequential (median ms)", "worker.BenchmarkGroupRequest/256 p50-ms", "worker.BenchmarkSequentialRequests/256 p50-ms", false},
	{"name resolve add, embedded etcd (median)", "etcd.BenchmarkEtcdAdd p50-µs", "", false},
	{"name resolve get, embedded etcd (median)", "etcd.BenchmarkEtcdGet p50-µs", "", false},
	{"name resolve wait for a key added later (median)", "etcd.BenchmarkEtcdWait/added p50-µs", "", false},
}

// results maps "pkg.Benchmark metric" to its value.
type results map[string]float64

func parse(r io.Reader) (results, error) {
	out := results{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndex(p, "/")+1:]
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 { // drop the -GOMAXPROCS suffix
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		// f[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			out[pkg+"."+name+" "+f[i+1]] = v
		}
	}
	return out, sc.Err()
}

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtab:", err)
		os.Exit(1)
	}
	write(os.Stdout, res)
}

func write(w io.Writer, res results) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nFIGURE\tMEASURED\tLIMIT (same run)\tRATIO")
	for _, r := range rows {
		m, okM := res[r.measured]
		if r.limit == "" { // a figure of its own, with nothing to hold it against
			fmt.Fprintf(tw, "%s\t%s\t-\t-\n", r.title, fmtVal(m, okM, r.measured))
			continue
		}
		l, okL := res[r.limit]
		if !okM || !okL || m == 0 || l == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\tnot measured\n", r.title, fmtVal(m, okM, r.measured), fmtVal(l, okL, r.limit))
			continue
		}
		ratio := m / l
		if !r.higherIsBetter {
			ratio = l / m
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fx\n", r.title, fmtVal(m, true, r.measured), fmtVal(l, true, r.limit), ratio)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRATIO: 1.00x means as fast as the limit; above 1 is faster (group vs sequential: speed-up).")
}

func fmtVal(v float64, ok bool, key string) string {
	if !ok {
		return "-"
	}
	unit := key[strings.LastIndex(key, " ")+1:]
	return strconv.FormatFloat(v, 'g', 4, 64) + " " + unit
}
