package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/telemetry"
)

// Bounds of the API.
const (
	// snapshotTTL: requests within it share one snapshot, so that many
	// open pages, a scrape and /sd cost one read of the trial.
	snapshotTTL = 500 * time.Millisecond
	// snapshotTimeout bounds one snapshot, whoever waits for it.
	snapshotTimeout = 5 * time.Second
	// maxHistoryPoints bounds one /api/history reply: a client of a long
	// trial asks again from Next.
	maxHistoryPoints = 5000
)

// Options configure a Handler.
type Options struct {
	// Token, when not empty, is required on every request (see the
	// package doc).
	Token string
	// Self is the dashboard's "host:port" as Prometheus reaches it, its
	// own target in /sd; "": none (see SetSelf).
	Self   string
	Logger *slog.Logger
}

// Handler serves a dashboard of one Source:
//
//	GET /                              the page
//	GET /api/trial                     Snapshot (JSON)
//	GET /api/history?since=N           History: the points from index N on
//	GET /api/log?worker=NAME&bytes=N   the tail of a worker's log (text), N <= 64 KiB
//	GET /sd                            Prometheus http_sd document: the workers and the dashboard
//	GET /metrics                       the trial-level metrics
type Handler struct {
	src  Source
	log  *slog.Logger
	self atomic.Pointer[string]
	reg  *telemetry.Registry
	http http.Handler

	mu sync.Mutex // held while a snapshot is taken: one at a time
	// cache holds the last snapshot with the workers' stats ([1]) and
	// without ([0]).
	cache [2]struct {
		snap *Snapshot
		at   time.Time
	}
}

// New returns the dashboard of src.
func New(src Source, opts Options) *Handler {
	h := &Handler{src: src, log: opts.Logger, reg: telemetry.NewRegistry()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.SetSelf(opts.Self)
	h.reg.Prometheus().MustRegister(newTrialCollector(h))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", servePage)
	mux.HandleFunc("GET /api/trial", h.serveTrial)
	mux.HandleFunc("GET /api/history", h.serveHistory)
	mux.HandleFunc("GET /api/log", h.serveLog)
	mux.HandleFunc("GET /sd", h.serveSD)
	mux.Handle("GET /metrics", h.reg.Handler())
	h.http = requireToken(opts.Token, headers(mux))
	return h
}

// SetSelf sets the dashboard's own address in /sd (known once it listens).
func (h *Handler) SetSelf(addr string) { h.self.Store(&addr) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// headers sets what every reply carries: nothing is framed, sniffed or
// refers elsewhere (a token may be in the URL).
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// snapshot returns the trial now (with the workers' stats or without),
// shared with the requests of the last snapshotTTL; one with stats serves
// a request without. It runs apart from the request's context: a client
// that goes away does not spoil the snapshot of the others waiting for it.
func (h *Handler) snapshot(ctx context.Context, stats bool) (*Snapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.cache[boolIndex(stats):] {
		if c.snap != nil && time.Since(c.at) < snapshotTTL {
			return c.snap, nil
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotTimeout)
	defer cancel()
	snap, err := h.src.Snapshot(sctx, stats)
	if err != nil {
		return nil, err
	}
	c := &h.cache[boolIndex(stats)]
	c.snap, c.at = snap, time.Now()
	return snap, nil
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (h *Handler) serveTrial(w http.ResponseWriter, r *http.Request) {
	snap, err := h.snapshot(r.Context(), true)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, snap)
}

func (h *Handler) serveHistory(w http.ResponseWriter, r *http.Request) {
	since, err := intParam(r, "since", 0)
	if err != nil || since < 0 {
		http.Error(w, "dashboard: since: want a non-negative integer", http.StatusBadRequest)
		return
	}
	hist, err := h.src.History(r.Context(), since, maxHistoryPoints)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, hist)
}

func (h *Handler) serveLog(w http.ResponseWriter, r *http.Request) {
	n, err := intParam(r, "bytes", DefaultLogBytes)
	if err != nil || n <= 0 {
		http.Error(w, "dashboard: bytes: want a positive integer", http.StatusBadRequest)
		return
	}
	tail, err := h.src.LogTail(r.Context(), r.URL.Query().Get("worker"), min(n, MaxLogBytes))
	if errors.Is(err, ErrUnknownWorker) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(tail)
}

func (h *Handler) serveSD(w http.ResponseWriter, r *http.Request) {
	snap, err := h.snapshot(r.Context(), false)
	if err != nil {
		h.fail(w, err)
		return
	}
	exp, trial := h.src.Names()
	var extra []telemetry.TargetGroup
	if self := *h.self.Load(); self != "" {
		extra = append(extra, SelfTarget(exp, trial, self))
	}
	writeJSON(w, telemetry.Targets(exp, trial, snap.Statuses, extra...))
}

// SelfTarget is the target group of a dashboard at addr: its /metrics,
// the trial's own figures, as process "ctl".
func SelfTarget(experiment, trial, addr string) telemetry.TargetGroup {
	return telemetry.TargetGroup{Targets: []string{addr}, Labels: map[string]string{
		telemetry.LabelProcess: "ctl", telemetry.LabelExperiment: experiment, telemetry.LabelTrial: trial,
	}}
}

func (h *Handler) fail(w http.ResponseWriter, err error) {
	h.log.Warn("dashboard request failed", "err", err)
	http.Error(w, "dashboard: "+err.Error(), http.StatusInternalServerError)
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
