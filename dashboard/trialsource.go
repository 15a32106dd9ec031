package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// Connector opens the control panel of the trial. TrialSource calls it
// when it first needs the workers, and again after a failure, and calls
// release (if not nil) once closed.
type Connector func(ctx context.Context) (p *panel.ControlPanel, release func(), err error)

// PanelConnector is the Connector of a panel already open (the caller
// closes it).
func PanelConnector(p *panel.ControlPanel) Connector {
	return func(context.Context) (*panel.ControlPanel, func(), error) { return p, nil, nil }
}

// DefaultStatsTimeout bounds the stats requests of one snapshot: a worker
// that does not answer in time shows without figures, and the page stays live.
const DefaultStatsTimeout = time.Second

// maxConfigBytes bounds the configuration text shown.
const maxConfigBytes = 1 << 20

// TrialSource is the Source of a trial run by a controller: the workers'
// records (HUNG and LOST concluded) and stats through a control panel,
// the controller's record, configuration, metrics and logs from the
// trial directory.
type TrialSource struct {
	dir          controller.TrialDir
	experiment   string
	trial        string
	connect      Connector
	statsTimeout time.Duration
	hist         history

	mu      sync.Mutex
	panel   *panel.ControlPanel
	release func()
	known   map[string]bool // the workers of the last snapshot
}

// NewTrialSource returns the source of trial experiment/trial whose
// directory is dir; connect reaches its workers.
func NewTrialSource(dir controller.TrialDir, experiment, trial string, connect Connector) *TrialSource {
	return &TrialSource{
		dir: dir, experiment: experiment, trial: trial, connect: connect, statsTimeout: DefaultStatsTimeout,
		hist: history{path: dir.Path(controller.MetricsFile)}, known: map[string]bool{},
	}
}

// Names implements Source.
func (s *TrialSource) Names() (string, string) { return s.experiment, s.trial }

// Close releases the panel the connector opened.
func (s *TrialSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.release != nil {
		s.release()
	}
	s.panel, s.release = nil, nil
	return nil
}

// controlPanel returns the panel, connecting first if need be.
func (s *TrialSource) controlPanel(ctx context.Context) (*panel.ControlPanel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.panel != nil {
		return s.panel, nil
	}
	p, release, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.panel, s.release = p, release
	return p, nil
}

// Snapshot implements Source. What cannot be read (the name server, the
// controller's record) is said in Problem, and the rest is returned.
func (s *TrialSource) Snapshot(ctx context.Context, stats bool) (*Snapshot, error) {
	snap := &Snapshot{Experiment: s.experiment, Trial: s.trial, Time: time.Now(), Controller: Controller{State: "unknown"}}
	var problems []error
	rec, err := s.dir.ReadRecord()
	runKey := ""
	if err == nil {
		snap.Controller = Controller{State: rec.State, PID: rec.PID, Host: rec.Host, Started: &rec.Started,
			Ended: rec.Ended, Message: rec.Message}
		for _, n := range rec.Restarts {
			snap.Controller.Restarts += n
		}
		runKey = runOf(rec)
	} else {
		rec = &controller.Record{}
		problems = append(problems, err)
	}
	if text, err := readBounded(s.dir.Path(controller.ConfigFile), maxConfigBytes); err != nil {
		problems = append(problems, err)
	} else {
		snap.Config = text
	}
	if err := s.hist.refresh(runKey); err != nil {
		problems = append(problems, err)
	}
	snap.Last = s.hist.last()
	if p, err := s.controlPanel(ctx); err != nil {
		problems = append(problems, fmt.Errorf("workers: %w", err))
	} else if snap.Statuses, err = p.Workers(ctx); err != nil {
		problems = append(problems, fmt.Errorf("workers: %w", err))
	} else {
		if !stats {
			p = nil
		}
		snap.Workers = s.rows(ctx, p, snap.Statuses, rec)
	}
	if snap.Workers == nil {
		snap.Workers = s.rows(ctx, nil, nil, rec) // the record still names them
	}
	if err := errors.Join(problems...); err != nil {
		snap.Problem = err.Error()
	}
	known := make(map[string]bool, len(snap.Workers))
	for _, w := range snap.Workers {
		known[w.Name] = true
	}
	s.mu.Lock()
	s.known = known
	s.mu.Unlock()
	return snap, nil
}

// rows builds the workers table from the status records, the stats of the
// workers that can answer (p nil: none asked) and the controller's record.
func (s *TrialSource) rows(ctx context.Context, p *panel.ControlPanel, statuses []member.Status, rec *controller.Record) []Worker {
	byName := map[string]*Worker{}
	var ask []string
	for _, st := range statuses {
		_, index, err := names.ParseWorkerName(st.Name)
		if err != nil || index < 0 {
			continue // the controller's "ctl", or a record no worker wrote
		}
		byName[st.Name] = &Worker{Name: st.Name, Type: st.TypeOf(), Index: index, Host: st.Host, PID: st.PID,
			State: string(st.State), Warning: st.Warning, Note: st.Note, Error: st.Error, Metrics: st.Metrics}
		if st.Address != "" && !st.State.Final() && st.State != member.StateHung {
			ask = append(ask, st.Name) // a hung loop would not answer in time
		}
	}
	for name, pid := range rec.Workers {
		if _, ok := byName[name]; ok {
			continue
		}
		if typ, index, err := names.ParseWorkerName(name); err == nil && index >= 0 {
			byName[name] = &Worker{Name: name, Type: typ, Index: index, PID: pid, State: "UNKNOWN"}
		}
	}
	if p != nil && len(ask) > 0 {
		sctx, cancel := context.WithTimeout(ctx, s.statsTimeout)
		for _, r := range p.GroupRequest(sctx, ask, member.CmdStats, nil) {
			var st map[string]any
			if w := byName[r.Worker]; w != nil && r.Decode(&st) == nil {
				w.setStats(st)
			}
		}
		cancel()
	}
	out := make([]Worker, 0, len(byName))
	for name, w := range byName {
		w.Restarts = rec.Restarts[name]
		out = append(out, *w)
	}
	group := func(w Worker) string { g, _, _ := strings.Cut(w.Name, "/"); return g }
	slices.SortFunc(out, func(a, b Worker) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(group(a), group(b)), cmp.Compare(a.Index, b.Index))
	})
	return out
}

// rateKeys are, by type, the stat that says its throughput in env steps.
var rateKeys = map[string]string{
	member.TypeActor: "steps_per_s", member.TypePolicy: "rows_per_s", member.TypeTrainer: "train_samples_per_s",
}

// setStats takes the figures of the table from a stats reply.
func (w *Worker) setStats(st map[string]any) {
	w.Stats = controller.KeyStats(w.Type, st)
	if v, ok := controller.Number(st[rateKeys[w.Type]]); ok {
		w.StepsPerS = &v
	}
	if v, ok := controller.Number(st["mean_batch"]); ok && w.Type == member.TypePolicy {
		w.MeanBatch = &v
	}
	for _, k := range []string{member.StatVersion, "version_last"} {
		if v, ok := controller.Number(st[k]); ok {
			vi := int64(v)
			w.Version = &vi
			break
		}
	}
}

// runOf names the run of the trial that rec's controller runs: a new one
// starts metrics.jsonl over.
func runOf(rec *controller.Record) string {
	return strconv.Itoa(rec.PID) + "@" + rec.Started.Format(time.RFC3339Nano)
}

// History implements Source.
func (s *TrialSource) History(_ context.Context, since, limit int) (History, error) {
	runKey := ""
	if rec, err := s.dir.ReadRecord(); err == nil {
		runKey = runOf(rec)
	}
	if err := s.hist.refresh(runKey); err != nil {
		return History{}, err
	}
	return s.hist.since(since, limit), nil
}

// LogTail implements Source: only the log of a worker the trial has
// (in the last snapshot or the controller's record) is read, so a name
// never becomes a path of the caller's choosing.
func (s *TrialSource) LogTail(_ context.Context, worker string, max int) ([]byte, error) {
	s.mu.Lock()
	ok := s.known[worker]
	s.mu.Unlock()
	if !ok {
		if rec, err := s.dir.ReadRecord(); err == nil {
			_, ok = rec.Workers[worker]
		}
	}
	if _, index, err := names.ParseWorkerName(worker); !ok || err != nil || index < 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorker, worker)
	}
	return tailFile(s.dir.Log(worker), max)
}

// readBounded reads up to max bytes of the file at path.
func readBounded(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("dashboard: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return "", fmt.Errorf("dashboard: %w", err)
	}
	return string(b), nil
}
