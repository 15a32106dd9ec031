package telemetry

import (
	"os"
	"regexp"
	"slices"
	"testing"
	"time"
)

// allFamilies makes a series of every distrl family of r and returns the
// names of the families gathered.
func allFamilies(t *testing.T, r *Registry) []string {
	t.Helper()
	w := r.Worker(actor0)
	w.SetState("RUNNING")
	w.Request("ping", "ok")
	loop := &Loop{}
	loop.Turned(time.Now())
	w.SetLoop(loop)
	w.Actor()
	w.Policy()
	w.Trainer().Loss("policy", 1)
	w.Sink()
	w.ReplayTable("t")
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		if len(mf.GetName()) > len(Namespace) && mf.GetName()[:len(Namespace)+1] == Namespace+"_" {
			names = append(names, mf.GetName())
		}
	}
	return names
}

// docs/metrics.md lists every worker metric the registry has, and none it
// does not (the trial-level distrl_trial_* series are the dashboard's).
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(distrl_[a-z_]+)`").FindAllStringSubmatch(string(doc), -1) {
		if !regexp.MustCompile(`^distrl_trial_`).MatchString(m[1]) {
			documented = append(documented, m[1])
		}
	}
	have := allFamilies(t, NewRegistry())
	for _, n := range have {
		if !slices.Contains(documented, n) {
			t.Errorf("%s is not in docs/metrics.md", n)
		}
	}
	for _, n := range documented {
		if !slices.Contains(have, n) {
			t.Errorf("docs/metrics.md lists %s, which the registry does not have", n)
		}
	}
}
