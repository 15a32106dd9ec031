package telemetry

import (
	"bufio"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The scrape handler writes the text exposition format (version 0.0.4,
// which every Prometheus reads) itself for the distrl families, and with
// expfmt for the others (the Go and process collectors, the caller's).
// expfmt checks, for every series, that the metric and label names need no
// escaping and writes each label through its accessors: with the sorting
// and checks of a prometheus.Registry's Gather (gather.go), three quarters
// of the CPU a scrape of a process hosting 256 workers took. The distrl
// families' names are valid by construction (TestNamingConventions), so
// only label values are escaped here, as the format asks.

// scrapesInFlight bounds the scrapes served at once; more get 503.
const scrapesInFlight = 2

// textFormat is the exposition's content type.
var textFormat = string(expfmt.NewFormat(expfmt.TypeTextPlain))

// scrapeHandler serves a Registry at GET /metrics.
type scrapeHandler struct {
	r     *Registry
	slots chan struct{}
}

func (h *scrapeHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		http.Error(w, "too many scrapes in flight", http.StatusServiceUnavailable)
		return
	}
	others, err := h.r.reg.Gather()
	if err != nil {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	own, err := h.r.gatherFamilies()
	if err != nil {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", textFormat)
	bw := bufio.NewWriterSize(w, 64<<10)
	bp := lines.Get().(*[]byte)
	defer lines.Put(bp)
	// Both lists are sorted by name: merged, the families come in order.
	for len(others)+len(own) > 0 {
		if len(own) == 0 || len(others) > 0 && others[0].GetName() < own[0].mf.GetName() {
			if _, err := expfmt.MetricFamilyToText(bw, others[0]); err != nil {
				return // the client went away
			}
			others = others[1:]
			continue
		}
		*bp = own[0].appendText((*bp)[:0])
		if _, err := bw.Write(*bp); err != nil {
			return
		}
		own = own[1:]
	}
	_ = bw.Flush()
}

// lines holds the buffers a family's text is made in.
var lines = sync.Pool{New: func() any { return new([]byte) }}

// appendText appends the family's series (a counter, gauge or histogram
// family) in the text format to b.
func (f gathered) appendText(b []byte) []byte {
	mf := f.mf
	name := mf.GetName()
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = appendEscaped(b, mf.GetHelp(), false)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, strings.ToLower(mf.GetType().String())...)
	b = append(b, '\n')
	for _, m := range mf.Metric {
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			b = f.appendSample(b, name, "", m.Label, "", 0, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			b = f.appendSample(b, name, "", m.Label, "", 0, m.GetGauge().GetValue())
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			inf := false
			for _, bk := range h.Bucket {
				ub := bk.GetUpperBound()
				inf = inf || math.IsInf(ub, +1)
				b = f.appendSample(b, name, "_bucket", m.Label, "le", ub, float64(bk.GetCumulativeCount()))
			}
			if !inf {
				b = f.appendSample(b, name, "_bucket", m.Label, "le", math.Inf(+1), float64(h.GetSampleCount()))
			}
			b = f.appendSample(b, name, "_sum", m.Label, "", 0, h.GetSampleSum())
			b = f.appendSample(b, name, "_count", m.Label, "", 0, float64(h.GetSampleCount()))
		}
	}
	return b
}

// appendSample appends one line: name+suffix, the labels (and extra="x",
// x written as a float, when extra is set), the value. The label names are
// the family's, unless a series has other labels than it (not one of the
// vectors made here).
func (f gathered) appendSample(b []byte, name, suffix string, labels []*dto.LabelPair, extra string, x, v float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(labels) > 0 || extra != "" {
		b = append(b, '{')
		own := len(labels) == len(f.labels)
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			if own {
				b = append(b, f.labels[i]...)
			} else {
				b = append(b, l.GetName()...)
				b = append(b, `="`...)
			}
			b = appendEscaped(b, l.GetValue(), true)
			b = append(b, '"')
		}
		if extra != "" {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, extra...)
			b = append(b, `="`...)
			b = appendFloat(b, x)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

// appendEscaped appends s with backslashes and line feeds escaped, and
// double quotes too in a label value (the text format's rules).
func appendEscaped(b []byte, s string, quotes bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quotes:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat writes v as the text format does (and expfmt).
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
