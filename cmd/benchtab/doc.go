// Command benchtab reads `go test -bench` output on stdin and prints the
// table of `make bench`: each measured figure beside the limit measured in
// the same run, and their ratio.
package main
