package telemetry

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

// The handler's own text exposition says what a prometheus.Registry's
// Gather says, read back by Prometheus's text parser: every family, series,
// label (values with quotes, backslashes and line feeds included) and value
// (NaN and infinities, histograms' buckets), and the families of the
// Prometheus registry (Go, process, the caller's) beside them.
func TestExpositionParsesBack(t *testing.T) {
	r := NewRegistry()
	odd := Identity{Experiment: `exp"with\\quotes`, Trial: "line\nfeed", Type: "actor", Index: 3}
	for _, id := range []Identity{actor0, odd} {
		w := r.Worker(id)
		w.SetState("READY")
		w.SetState("RUNNING")
		w.Request("ping", "ok")
		w.Request(`we"ird`, "ok")
		a := w.Actor()
		a.EnvSteps.Add(1e9)
		a.Return.Set(math.NaN())
		a.Backpressured.Add(0.25)
		p := w.Policy()
		p.BatchSize.Observe(3)
		p.BatchSize.Observe(1e6) // past the last bucket
		p.Version.Set(math.Inf(-1))
		w.Trainer().Loss("policy", math.Inf(+1))
		w.ReplayTable("main").Items.Set(-2)
	}
	want, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	got, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, r)))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	if len(got) != len(want) {
		t.Errorf("%d families parsed, %d gathered", len(got), len(want))
	}
	for _, mf := range want {
		name := mf.GetName()
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			if got[name] == nil {
				t.Errorf("family %s missing", name)
			}
			continue // their values move between the two reads
		}
		if name == Namespace+"_loop_heartbeat_age_seconds" {
			continue // likewise
		}
		g := got[name]
		if g == nil {
			t.Errorf("family %s missing", name)
			continue
		}
		if !sameFamily(g, mf) {
			t.Errorf("family %s:\nparsed   %v\ngathered %v", name, g, mf)
		}
	}
}

// sameFamily compares two families, their series in any order, NaN equal
// to NaN.
func sameFamily(a, b *dto.MetricFamily) bool {
	if a.GetName() != b.GetName() || a.GetHelp() != b.GetHelp() || a.GetType() != b.GetType() || len(a.Metric) != len(b.Metric) {
		return false
	}
	key := func(m *dto.Metric) string {
		ls := model.LabelSet{}
		for _, l := range m.Label {
			ls[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
		}
		return ls.String()
	}
	byKey := map[string]*dto.Metric{}
	for _, m := range b.Metric {
		byKey[key(m)] = m
	}
	for _, m := range a.Metric {
		o := byKey[key(m)]
		if o == nil {
			return false
		}
		x, y := proto.Clone(m).(*dto.Metric), proto.Clone(o).(*dto.Metric)
		for _, d := range []*dto.Metric{x, y} {
			if d.Gauge != nil && math.IsNaN(d.Gauge.GetValue()) {
				d.Gauge.Value = proto.Float64(-12345)
			}
			if d.Counter != nil {
				d.Counter.CreatedTimestamp = nil
			}
			if h := d.Histogram; h != nil {
				h.CreatedTimestamp = nil
				// The text format always ends with the +Inf bucket.
				if n := len(h.Bucket); n > 0 && math.IsInf(h.Bucket[n-1].GetUpperBound(), +1) {
					h.Bucket = h.Bucket[:n-1]
				}
			}
		}
		if !proto.Equal(x, y) {
			return false
		}
	}
	return true
}

// Scrapes beyond scrapesInFlight are refused with 503 while the others run.
func TestScrapesInFlight(t *testing.T) {
	h := &scrapeHandler{r: NewRegistry(), slots: make(chan struct{}, scrapesInFlight)}
	serve := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Code
	}
	if code := serve(); code != http.StatusOK {
		t.Fatalf("a scrape: %d", code)
	}
	for range scrapesInFlight {
		h.slots <- struct{}{} // scrapes under way
	}
	if code := serve(); code != http.StatusServiceUnavailable {
		t.Errorf("a scrape beyond %d in flight: %d, want 503", scrapesInFlight, code)
	}
	<-h.slots
	if code := serve(); code != http.StatusOK {
		t.Errorf("a scrape once one finished: %d", code)
	}
}
