// Package benchutil records per-operation latencies in benchmarks and
// reports percentiles and throughput as custom benchmark metrics, so that
// `make bench` can put them in its table.
package benchutil
