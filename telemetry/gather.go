package telemetry

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The distrl families are gathered here rather than by a
// prometheus.Registry. A Registry checks every series it gathers (label
// names valid and unique, the series not seen before: a hash of each) and
// sorts each family's series by their label values; for a process hosting
// 256 workers that was 42% of a scrape's CPU (10 ms on the 2-core
// development machine), and most of it chasing the pointers of each
// series' labels. These families are distrl's own, their label names
// fixed and each series made once per worker through its vector, so
// there is nothing to check; Prometheus does not need a family's series
// in order.

// family is one distrl metric family and the collector of its series.
type family struct {
	c    prometheus.Collector
	name string // with the namespace
	help string
	typ  dto.MetricType
	// labels are `name="` of each label of the series, in the order a
	// series' labels come in (sorted by name), for the exposition.
	labels []string
}

// add makes c's series, with the label names labels, the family
// Namespace_name.
func (r *Registry) add(c prometheus.Collector, name, help string, typ dto.MetricType, labels []string) {
	f := family{c: c, name: Namespace + "_" + name, help: help, typ: typ}
	for _, l := range slices.Sorted(slices.Values(labels)) {
		f.labels = append(f.labels, l+`="`)
	}
	r.fams = append(r.fams, f)
}

// Gather returns the distrl families that have series and everything
// Prometheus's registry gathers, ordered by name (prometheus.Gatherer). A
// series that cannot be written is left out and its error returned with
// the rest, as a prometheus.Registry does.
func (r *Registry) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := r.reg.Gather()
	own, ownErr := r.gatherFamilies()
	for _, f := range own {
		mfs = append(mfs, f.mf)
	}
	slices.SortFunc(mfs, byName)
	return mfs, errors.Join(err, ownErr)
}

// gathered is a family's series, as gathered.
type gathered struct {
	*family
	mf *dto.MetricFamily
}

// gatherFamilies gathers the distrl families that have series, by name.
func (r *Registry) gatherFamilies() ([]gathered, error) {
	var fs []gathered
	var errs []error
	for i := range r.fams {
		mf, err := r.fams[i].gather()
		if err != nil {
			errs = append(errs, err)
		}
		if mf != nil {
			fs = append(fs, gathered{&r.fams[i], mf})
		}
	}
	slices.SortFunc(fs, func(a, b gathered) int { return byName(a.mf, b.mf) })
	return fs, errors.Join(errs...)
}

func byName(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) }

// gather collects f's series; nil when it has none.
func (f *family) gather() (*dto.MetricFamily, error) {
	ch := make(chan prometheus.Metric, 256)
	go func() {
		f.c.Collect(ch)
		close(ch)
	}()
	var ms []*dto.Metric
	var errs []error
	for m := range ch {
		dm := &dto.Metric{}
		if err := m.Write(dm); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: collecting %s: %w", f.name, err))
			continue
		}
		ms = append(ms, dm)
	}
	err := errors.Join(errs...)
	if len(ms) == 0 {
		return nil, err
	}
	return &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: &f.typ, Metric: ms}, err
}
