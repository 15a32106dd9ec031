// Package telemetry is the Prometheus side of a distrl process: one
// registry per process (every distrl metric family, gathered and written
// in the text format by the package itself, beside a private
// prometheus.Registry of the Go and process collectors and the caller's),
// the handles through which the worker base and the worker types record
// (Worker, and its Actor, Policy, Trainer, Replay and Sink parts), the
// /metrics handler, and the HTTP service discovery document
// (http_sd_configs) built from a trial's status records.
//
// Every metric is named distrl_..., in base units, with _total on
// counters, and carries the labels experiment, trial, type and index of
// the worker it is about; never a label per episode or environment.
// docs/metrics.md lists them all.
//
// Recording is always on: a handle's metrics are a few atomic additions
// per loop turn or per batch. What is optional is serving them (rlctl
// worker --metrics): a process whose registry nobody scrapes pays nothing
// else.
package telemetry
