package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/evalworker"
	"github.com/distrl/distrl/internal/webserve"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/sinkworker"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker"
	"github.com/urfave/cli/v2"
)

// builtinTypes is the registry of every built-in worker type.
func builtinTypes() (*worker.Registry, error) {
	// The program registers what it offers, once: its worker types here,
	// and the environments their configurations may name in api's
	// registry. No library registers anything itself.
	if err := env.Register(); err != nil {
		return nil, err
	}
	reg := worker.NewRegistry()
	for _, t := range []worker.Type{
		echoworker.Type(),
		sinkworker.Type(),
		policyworker.NewType(accel.policy),
		actorworker.Type(),
		trainerworker.NewType(accel.trainer),
		replayworker.Type(),
		evalworker.Type(),
	} {
		if err := reg.Add(t); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// spinWait is --spin-wait as worker.Options takes it: there 0 is the
// default, and what turns looking off is a negative value.
func spinWait(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run one worker in the foreground until told to exit (SIGINT/SIGTERM exit gracefully)",
		Flags: withGlobal(
			&cli.StringFlag{Name: "type", Required: true, Usage: "worker type"},
			&cli.StringFlag{Name: "group", Usage: "the experiment's group of workers this one is of: the worker is named GROUP/INDEX (default: TYPE)"},
			&cli.IntFlag{Name: "index", Value: 0, Usage: "worker index: the worker is named GROUP/INDEX"},
			&cli.IntFlag{Name: "count", Value: 1, Usage: "run this many workers in this process, TYPE/INDEX to TYPE/INDEX+COUNT-1, sharing one socket and one loop (scale tests: thousands of workers on one machine)"},
			&cli.StringSliceFlag{Name: "with", Usage: "also run the worker `GROUP[=TYPE]`/INDEX in this process and loop (a group's colocate: an actor's policy worker answers it without a hand-off between processes); TYPE defaults to GROUP; with --count 1"},
			&cli.StringFlag{Name: "host", EnvVars: []string{"RLCTL_HOST"}, Usage: "address to bind and advertise (default: this machine's address on the interface that routes to the name server)"},
			&cli.IntFlag{Name: "port", Value: 0, Usage: "port to bind (0: any free port)"},
			&cli.DurationFlag{Name: "ttl", Value: worker.DefaultAddressTTL, Usage: "lease of the address record: how long it outlives a killed worker"},
			&cli.DurationFlag{Name: "status-ttl", Value: worker.DefaultStatusTTL, Usage: "lease of the status record"},
			&cli.StringFlag{Name: "cpuprofile", EnvVars: []string{"RLCTL_CPUPROFILE"}, Usage: "write a CPU profile of the worker to `PREFIX`.TYPE.INDEX (pprof), for --cpuprofile-for or until it exits"},
			&cli.DurationFlag{Name: "cpuprofile-for", Value: 10 * time.Second, EnvVars: []string{"RLCTL_CPUPROFILE_FOR"}, Usage: "how long --cpuprofile profiles, from the start"},
			&cli.DurationFlag{Name: "spin-wait", Value: worker.DefaultSpinWait, EnvVars: []string{"RLCTL_SPIN_WAIT"}, Usage: "how long an idle worker looks for input in shared memory (inference between processes of one node), yielding the CPU, before it sleeps; it looks only while its recent waits were shorter on average (0: never)"},
			&cli.DurationFlag{Name: "heartbeat", Value: worker.DefaultHeartbeat, Usage: "how often the worker loop refreshes the heartbeat of its status record (a panel reports HUNG when it is older than its bound)"},
			&cli.DurationFlag{Name: flagNameResolveWait, Usage: "keep trying a name server that does not answer (to connect, and to register) for this long before giving up (rlctl start gives its workers 30s)"},
			&cli.DurationFlag{Name: "orphan-timeout", Usage: "interrupt the worker once the trial's controller record (ctl), after it was seen, has been gone this long (0: never); rlctl start gives its workers 15s"},
			&cli.StringFlag{Name: "metrics", EnvVars: []string{"RLCTL_METRICS"}, Usage: "serve the process's Prometheus metrics at http://`HOST:PORT`/metrics (\":0\": any free port on the worker's --host); the address goes into the workers' status records for service discovery. Off by default; rlctl start turns it on"},
		),
		Action: runWorker,
	}
}

func runWorker(c *cli.Context) error {
	if c.Int("index") < 0 {
		return cli.Exit(fmt.Sprintf("--index %d: must be >= 0", c.Int("index")), 2)
	}
	if c.Int("count") < 1 || (c.Int("count") > 1 && c.Int("port") != 0) {
		return cli.Exit(fmt.Sprintf("--count %d: must be >= 1, and 1 with --port", c.Int("count")), 2)
	}
	companions, err := parseWith(c.StringSlice("with"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if len(companions) > 0 && (c.Int("count") != 1 || c.Int("port") != 0) {
		return cli.Exit("--with: needs --count 1 and no --port (each companion binds a port of its own)", 2)
	}
	types, err := builtinTypes()
	if err != nil {
		return err
	}
	sess, err := openSession(c)
	if err != nil {
		return err
	}
	defer sess.Close()
	if core, chosen := nn.BLASCore(); chosen {
		sess.log.Info("OpenBLAS does not know this CPU: its "+core+" kernels run, chosen by the CPU's features, not its Prescott fallback (OPENBLAS_CORETYPE overrides)", "core", core)
	}
	host := workerHost(c, sess)
	opts := worker.Options{
		Trial: sess.trial, Registry: types, Type: c.String("type"), Group: c.String("group"), Index: c.Int("index"),
		Host: host, Port: c.Int("port"), Repo: sess.repo,
		AddressTTL: c.Duration("ttl"), StatusTTL: c.Duration("status-ttl"), Heartbeat: c.Duration("heartbeat"),
		SpinWait:     spinWait(c.Duration("spin-wait")),
		RegisterWait: c.Duration(flagNameResolveWait),
		Curve:        sess.curve, Logger: sess.log,
	}
	if addr := c.String("metrics"); addr != "" {
		srv, err := serveMetrics(addr, host, &opts, sess)
		if err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
		defer srv.Close()
	}
	workers, err := worker.NewHosted(c.Context, opts, c.Int("count"))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	for _, w := range companions {
		o := opts
		o.Type, o.Group = w.typ, w.group
		extra, err := worker.NewHosted(c.Context, o, 1)
		if err != nil {
			shutdownAll(workers)
			return cli.Exit(err.Error(), 1)
		}
		workers = append(workers, extra...)
	}
	if p := c.String("cpuprofile"); p != "" {
		stop, err := startCPUProfile(fmt.Sprintf("%s.%s.%d", p, cmp.Or(c.String("group"), c.String("type")), c.Int("index")), c.Duration("cpuprofile-for"))
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		defer stop()
	}
	ctx := c.Context
	if d := c.Duration("orphan-timeout"); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go watchController(ctx, cancel, sess, d)
	}
	if err := worker.RunMany(ctx, workers); err != nil {
		if errors.Is(err, worker.ErrFailed) {
			return cli.Exit(err.Error(), 3)
		}
		return err
	}
	return nil
}

// workerHost is --host, else the address of the interface that routes to
// the name server: on a cluster node, the one the other nodes reach.
func workerHost(c *cli.Context, sess *session) string {
	if h := c.String("host"); h != "" {
		return h
	}
	eps := endpoints(global(c, flagNameResolve))
	if len(eps) > 0 {
		h, err := worker.RouteHost(eps[0])
		if err == nil {
			return h
		}
		sess.log.Warn("advertising the first address of this machine", "err", err)
	}
	return worker.RoutableHost()
}

// watchController interrupts the worker (cancels its context) once the
// trial's controller record has been gone for timeout after it was seen:
// a worker on a cluster is not the controller's child, so nothing else
// would end it when the controller dies. Errors other than a missing
// record (etcd briefly away) do not count.
func watchController(ctx context.Context, interrupt context.CancelFunc, sess *session, timeout time.Duration) {
	key := sess.trial.Worker(controller.CtlName)
	tick := time.NewTicker(min(time.Second, max(timeout/4, 50*time.Millisecond)))
	defer tick.Stop()
	seen := false
	var gone time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := sess.repo.Get(gctx, key)
		cancel()
		switch {
		case err == nil:
			seen, gone = true, time.Time{}
		case !seen || !errors.Is(err, nameresolve.ErrNotFound):
		case gone.IsZero():
			gone = time.Now()
		case time.Since(gone) >= timeout:
			sess.log.Warn("the trial's controller is gone: interrupting", "record", key, "gone_for", time.Since(gone).Round(time.Millisecond))
			interrupt()
			return
		}
	}
}

// startCPUProfile profiles the process into path for d (benchmarks kill
// their workers, so the profile must be complete before that); stop ends
// it early. Both are safe to call more than once.
func startCPUProfile(path string, d time.Duration) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}
	time.AfterFunc(d, stop)
	return stop, nil
}

// serveMetrics serves a new registry at addr (an empty host: the worker's
// own) and has the workers of opts record into it and name it in their
// status records.
func serveMetrics(addr, host string, opts *worker.Options, sess *session) (*webserve.Server, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %q: want HOST:PORT or :PORT: %w", addr, err)
	}
	if h == "" {
		h = host
	}
	reg := telemetry.NewRegistry()
	srv, err := webserve.Listen(net.JoinHostPort(h, port), reg.Handler(), sess.log)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	advertised := srv.Addr()
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		// Bound on every interface: advertise the worker's own address.
		_, p, _ := net.SplitHostPort(advertised)
		advertised = net.JoinHostPort(host, p)
	}
	opts.Metrics, opts.MetricsAddr = reg, advertised
	sess.log.Info("serving metrics", "url", "http://"+advertised+"/metrics")
	return srv, nil
}

// companion is one --with: a worker of group, of type typ, hosted in this
// process at its index.
type companion struct{ group, typ string }

// parseWith reads the --with values, GROUP or GROUP=TYPE.
func parseWith(values []string) ([]companion, error) {
	var out []companion
	for _, v := range values {
		group, typ, _ := strings.Cut(v, "=")
		typ = cmp.Or(typ, group)
		if group == "" || typ == "" || strings.ContainsAny(v, "/ ") {
			return nil, fmt.Errorf("--with %q: want GROUP or GROUP=TYPE", v)
		}
		out = append(out, companion{group: group, typ: typ})
	}
	return out, nil
}

// shutdownAll ends workers that were made but will not run: RunMany under
// an ended context has each exit and give up its records.
func shutdownAll(workers []*worker.Worker) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = worker.RunMany(ctx, workers)
}
