// Package promtest is test support: finds a series in a telemetry
// registry by its family and labels, for tests that hold a worker's
// Prometheus metrics to what it did.
package promtest

import (
	"testing"

	"github.com/distrl/distrl/telemetry"
	dto "github.com/prometheus/client_model/go"
)

// Series is the first series of family name in reg whose labels include
// every pair of labels, or nil if there is none.
func Series(t testing.TB, reg *telemetry.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// Value is the value of a counter or gauge series (0 for nil).
func Value(m *dto.Metric) float64 { return m.GetCounter().GetValue() + m.GetGauge().GetValue() }

// Worker is the label set of worker typ/index of a trial, with the extra
// label pairs kv.
func Worker(experiment, trial, typ, index string, kv ...string) map[string]string {
	labels := map[string]string{"experiment": experiment, "trial": trial, "type": typ, "index": index}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	return labels
}
