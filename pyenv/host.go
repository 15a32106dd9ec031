package pyenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/python"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// Errors for errors.Is.
var (
	// ErrUnsupportedSpace: the environment's space is of a kind distrl
	// cannot use (a Dict observation, a MultiDiscrete action, ...).
	ErrUnsupportedSpace = errors.New("unsupported space")
	// ErrExited: the host process ended without being asked to.
	ErrExited = errors.New("python environment host exited")
	// ErrTimeout: the host did not answer within its deadline; it was killed.
	ErrTimeout = errors.New("python environment host did not answer in time")
	// ErrClosed: the host was closed.
	ErrClosed = errors.New("python environment host closed")
	// ErrProtocol: the host answered something this package does not
	// understand (a different distrl version, or output on the socket that
	// is not the host's).
	ErrProtocol = errors.New("python environment host protocol error")
)

// Error is a failure the host reported: a Python exception in the
// environment (Type "env_error"), a module that does not import
// ("import_error"), and so on. The traceback is also in the log.
type Error struct {
	Type, Message, Traceback string
}

func (e *Error) Error() string { return "python " + e.Type + ": " + e.Message }

// maxIPCPath is the longest ipc:// address used; sun_path holds 108 bytes
// on Linux (104 elsewhere), including its terminating zero.
const maxIPCPath = len("ipc://") + 100

// pollSlice bounds each wait on the socket, so that a host that died is
// noticed without waiting for the whole deadline.
const pollSlice = 100 * time.Millisecond

// infoWindow is the number of recent values InfoMeans averages per key.
const infoWindow = 100

// Host is one Python process holding a batch of environments, reached over
// a ZeroMQ PAIR socket on an ipc:// path in a private temporary directory
// (or the loopback, when that path would be too long for a socket). It
// implements [api.EnvBatch]: one Run is one message each way. A Host is
// not safe for concurrent use.
type Host struct {
	cfg    Config
	n      int
	log    *slog.Logger
	dir    string
	sock   *zmq.Socket
	poller *zmq.Poller
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
	output *outputLog

	obs, act api.Space
	agents   []string
	obsDim   int
	mask     []int // api.ActionMasker's; nil: none

	// broken is set once the host cannot be used any more (it exited,
	// missed a deadline, or broke the protocol); every later call returns it.
	broken error
	closed bool

	info map[string]*window
}

var _ api.EnvBatch = (*Host)(nil)

// Start starts a host for n environments built as cfg says (zero fields
// mean the defaults) and waits (within cfg.StartTimeout and ctx) until they
// are built and their spaces known. log receives the process's output,
// tracebacks included.
func Start(ctx context.Context, cfg Config, n int, log *slog.Logger) (_ *Host, err error) {
	if n < 1 {
		return nil, fmt.Errorf("pyenv: %d environments, want >= 1", n)
	}
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	pkg, err := python.Dir()
	if err != nil {
		return nil, fmt.Errorf("pyenv: %w", err)
	}
	h := &Host{cfg: cfg, n: n, log: log, exited: make(chan struct{}), info: map[string]*window{}}
	defer func() {
		if err != nil {
			h.kill()
			h.release()
		}
	}()
	if h.dir, err = os.MkdirTemp("", "distrl-envhost-"); err != nil {
		return nil, fmt.Errorf("pyenv: %w", err)
	}
	if h.sock, err = zmq.NewSocket(zmq.PAIR); err != nil {
		return nil, fmt.Errorf("pyenv: socket: %w", err)
	}
	if err = h.sock.SetLinger(0); err != nil {
		return nil, fmt.Errorf("pyenv: socket: %w", err)
	}
	addr := "ipc://" + filepath.Join(h.dir, "host.sock")
	if len(addr) > maxIPCPath {
		// A socket path longer than sun_path (a deep $TMPDIR on a
		// cluster node) cannot be bound: use the loopback instead.
		addr = "tcp://127.0.0.1:*"
	}
	if err = h.sock.Bind(addr); err != nil {
		return nil, fmt.Errorf("pyenv: bind %s: %w", addr, err)
	}
	if addr, err = h.sock.GetLastEndpoint(); err != nil {
		return nil, fmt.Errorf("pyenv: socket: %w", err)
	}
	h.poller = zmq.NewPoller()
	h.poller.Add(h.sock, zmq.POLLIN)

	h.output = &outputLog{log: log.With("python", cfg.Module)}
	h.cmd = exec.Command(cfg.Python, "-m", "distrl.envhost", addr)
	h.cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath(pkg), "PYTHONUNBUFFERED=1")
	h.cmd.Stdout, h.cmd.Stderr = h.output, h.output
	h.cmd.SysProcAttr = sysProcAttr()
	h.cmd.WaitDelay = time.Second // a grandchild holding the pipes does not hold Wait
	if err = h.cmd.Start(); err != nil {
		h.cmd = nil
		return nil, fmt.Errorf("pyenv: start %s: %w", cfg.Python, err)
	}
	go func() {
		_ = h.cmd.Wait()
		close(h.exited)
	}()

	var hello struct {
		Hello struct {
			Protocol int `msgpack:"protocol"`
		} `msgpack:"hello"`
	}
	if err = h.receive(ctx, cfg.StartTimeout, "start", &hello); err != nil {
		return nil, fmt.Errorf("pyenv: %w", err)
	}
	if hello.Hello.Protocol != protocolVersion {
		return nil, fmt.Errorf("pyenv: %w: host speaks protocol %d, want %d", ErrProtocol, hello.Hello.Protocol, protocolVersion)
	}
	var rep initReply
	err = h.call(ctx, cfg.StartTimeout, "init", initRequest{
		Op: "init", Module: cfg.Module, Factory: cfg.Factory, Kwargs: cfg.Kwargs, N: n, Path: cfg.Path,
	}, &rep)
	if err != nil {
		return nil, fmt.Errorf("pyenv: %s: %w", cfg.Module, err)
	}
	if h.obs, err = observationSpace(rep.ObservationSpace); err != nil {
		return nil, fmt.Errorf("pyenv: %s: %w", cfg.Module, err)
	}
	if h.act, err = actionSpace(rep.ActionSpace); err != nil {
		return nil, fmt.Errorf("pyenv: %s: %w", cfg.Module, err)
	}
	if len(rep.Agents) == 0 {
		return nil, fmt.Errorf("pyenv: %s: %w: no agents", cfg.Module, ErrProtocol)
	}
	h.agents, h.obsDim = rep.Agents, h.obs.Size()
	if err := checkMask(rep.ActionMask, h.act, h.obsDim); err != nil {
		return nil, fmt.Errorf("pyenv: %s: %w: action_mask_indices: %w", cfg.Module, ErrUnsupportedSpace, err)
	}
	h.mask = rep.ActionMask
	log.Debug("python environments started", "module", cfg.Module, "factory", cfg.Factory, "n", n,
		"agents", len(h.agents), "python", rep.Python, "pid", h.cmd.Process.Pid)
	return h, nil
}

// pythonPath puts the embedded package first, then what the caller had.
func pythonPath(pkg string) string {
	if old := os.Getenv("PYTHONPATH"); old != "" {
		return pkg + string(os.PathListSeparator) + old
	}
	return pkg
}

// Len is the number of environments.
func (h *Host) Len() int { return h.n }

// ObservationSpace is one agent's observation space.
func (h *Host) ObservationSpace() api.Space { return h.obs }

// ActionSpace is one agent's action space.
func (h *Host) ActionSpace() api.Space { return h.act }

// ActionMask is where an observation says which actions are available
// (api.ActionMasker): the environment's action_mask_indices, or nil.
func (h *Host) ActionMask() []int { return h.mask }

// checkMask refuses a mask that is not one observation index per action of
// a Discrete action space.
func checkMask(mask []int, act api.Space, obsDim int) error {
	if len(mask) == 0 {
		return nil
	}
	if act.Kind != api.Discrete || len(mask) != act.N {
		return fmt.Errorf("%d indices for an action space of %d actions (a mask needs one per action of a Discrete space)", len(mask), act.Dim())
	}
	for i, j := range mask {
		if j < 0 || j >= obsDim {
			return fmt.Errorf("action %d's index %d is outside the observation's %d values", i, j, obsDim)
		}
	}
	return nil
}

// Agents returns the agent ids: "agent_0" for a gymnasium environment,
// possible_agents for a PettingZoo one.
func (h *Host) Agents() []string { return h.agents }

// Pid returns the host's process id.
func (h *Host) Pid() int { return h.cmd.Process.Pid }

// Run resets and steps environments in one message (see api.EnvBatch).
// Actions are checked against the action space first (Box actions are
// clipped to its bounds); a bad one is an error wrapping
// api.ErrInvalidAction and nothing is sent.
func (h *Host) Run(ctx context.Context, resets []api.EnvReset, steps []api.EnvStep) error {
	if err := h.usable(); err != nil {
		return err
	}
	if len(resets)+len(steps) == 0 {
		return nil
	}
	req := batchRequest{Op: "batch"}
	for _, r := range resets {
		if r.Env < 0 || r.Env >= h.n {
			return fmt.Errorf("pyenv: reset of environment %d of %d", r.Env, h.n)
		}
		req.ResetEnvs = append(req.ResetEnvs, r.Env)
		req.Seeds = append(req.Seeds, r.Seed)
	}
	if len(steps) > 0 {
		actions, err := h.actions(steps)
		if err != nil {
			return err
		}
		req.Actions = actions
		for _, s := range steps {
			req.StepEnvs = append(req.StepEnvs, s.Env)
		}
	}
	var rep batchReply
	if err := h.call(ctx, h.cfg.StepTimeout, "batch", req, &rep); err != nil {
		return fmt.Errorf("pyenv: %s: %w", h.cfg.Module, err)
	}
	a := len(h.agents)
	if len(resets) > 0 {
		if !slices.Equal(rep.ResetObs.Shape, []int{len(resets), a, h.obsDim}) {
			return h.fail(fmt.Errorf("pyenv: %w: reset observations of shape %v", ErrProtocol, rep.ResetObs.Shape))
		}
		for i := range resets {
			resets[i].Obs = rows(rep.ResetObs.Data[i*a*h.obsDim:(i+1)*a*h.obsDim], a)
		}
		acting, err := actingRows(rep.ResetActing, len(resets), a, nil)
		if err != nil {
			return h.fail(fmt.Errorf("pyenv: %w: after reset: %w", ErrProtocol, err))
		}
		for i := range resets {
			resets[i].Acting = acting[i]
		}
	}
	if len(steps) > 0 {
		return h.results(steps, rep.Step)
	}
	return nil
}

// actions encodes the steps' actions as the host expects them.
func (h *Host) actions(steps []api.EnvStep) (any, error) {
	a := len(h.agents)
	if h.act.Kind == api.Discrete {
		t := api.NewTensor[int64](len(steps), a)
		for i, s := range steps {
			if err := h.checkStep(s); err != nil {
				return nil, err
			}
			for j, act := range s.Actions {
				t.Data[i*a+j] = int64(act.Discrete)
			}
		}
		return t, nil
	}
	d := h.act.Size()
	t := api.NewTensor[float32](len(steps), a, d)
	for i, s := range steps {
		if err := h.checkStep(s); err != nil {
			return nil, err
		}
		for j, act := range s.Actions {
			// A policy's Gaussian is unbounded: clip to the space, as
			// gymnasium's ClipAction does. The sample keeps the unclipped
			// action, whose log-probability the learner needs.
			row := t.Data[(i*a+j)*d : (i*a+j+1)*d]
			for k, v := range act.Continuous {
				row[k] = min(max(v, h.act.Low[k]), h.act.High[k])
			}
		}
	}
	return t, nil
}

func (h *Host) checkStep(s api.EnvStep) error {
	if s.Env < 0 || s.Env >= h.n {
		return fmt.Errorf("pyenv: step of environment %d of %d", s.Env, h.n)
	}
	if len(s.Actions) != len(h.agents) {
		return fmt.Errorf("pyenv: environment %d: %d actions for %d agents: %w", s.Env, len(s.Actions), len(h.agents), api.ErrInvalidAction)
	}
	for _, act := range s.Actions {
		if h.act.Kind == api.Discrete {
			if err := h.act.CheckAction(act); err != nil {
				return fmt.Errorf("pyenv: environment %d: %w", s.Env, err)
			}
			continue
		}
		if len(act.Continuous) != h.act.Size() || slices.ContainsFunc(act.Continuous, isNaN) {
			return fmt.Errorf("pyenv: environment %d: %w: %v for a Box of shape %v", s.Env, api.ErrInvalidAction, act.Continuous, h.act.Shape)
		}
	}
	return nil
}

func isNaN(v float32) bool { return v != v }

// results checks the step reply's shapes and fills the steps' Results.
func (h *Host) results(steps []api.EnvStep, r *stepReply) error {
	k, a := len(steps), len(h.agents)
	if r == nil || !slices.Equal(r.Obs.Shape, []int{k, a, h.obsDim}) || !slices.Equal(r.Rewards.Shape, []int{k, a}) ||
		!slices.Equal(r.Terminated.Shape, []int{k, a}) || !slices.Equal(r.Truncated.Shape, []int{k, a}) {
		return h.fail(fmt.Errorf("pyenv: %w: step reply of the wrong shapes", ErrProtocol))
	}
	for i := range steps {
		res := &steps[i].Result
		res.Obs = rows(r.Obs.Data[i*a*h.obsDim:(i+1)*a*h.obsDim], a)
		res.Rewards = r.Rewards.Data[i*a : (i+1)*a : (i+1)*a]
		res.Terminated = make([]bool, a)
		res.Truncated = make([]bool, a)
		for j := range a {
			res.Terminated[j] = r.Terminated.Data[i*a+j] != 0
			res.Truncated[j] = r.Truncated.Data[i*a+j] != 0
		}
	}
	acting, err := actingRows(r.Acting, k, a, func(i int) bool { return steps[i].Result.Done() })
	if err != nil {
		return h.fail(fmt.Errorf("pyenv: %w: after a step: %w", ErrProtocol, err))
	}
	for i := range steps {
		steps[i].Result.Acting = acting[i]
	}
	for key, t := range r.Info {
		w := h.info[key]
		if w == nil {
			w = &window{}
			h.info[key] = w
		}
		for _, v := range t.Data {
			if !math.IsNaN(v) {
				w.add(v)
			}
		}
	}
	return nil
}

// InfoMeans returns, for every numeric key of the environments' info
// dicts (averaged over agents), the mean of its last 100 values.
func (h *Host) InfoMeans() map[string]float64 {
	out := make(map[string]float64, len(h.info))
	for k, w := range h.info {
		out[k] = w.mean()
	}
	return out
}

// rows cuts flat into n rows that do not share capacity.
func rows(flat []float32, n int) [][]float32 {
	out := make([][]float32, n)
	w := len(flat) / n
	for i := range out {
		out[i] = flat[i*w : (i+1)*w : (i+1)*w]
	}
	return out
}

// call sends req and decodes the reply's "ok" into out.
func (h *Host) call(ctx context.Context, timeout time.Duration, what string, req, out any) error {
	b, err := msgpack.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	if _, err := h.sock.SendBytes(b, zmq.DONTWAIT); err != nil {
		return h.fail(fmt.Errorf("%w: send %s: %v", ErrProtocol, what, err))
	}
	var rep struct {
		OK    msgpack.RawMessage `msgpack:"ok"`
		Error *hostError         `msgpack:"error"`
	}
	if err := h.receive(ctx, timeout, what, &rep); err != nil {
		return err
	}
	if rep.Error != nil {
		return &Error{Type: rep.Error.Type, Message: rep.Error.Message, Traceback: rep.Error.Traceback}
	}
	if err := msgpack.Unmarshal(rep.OK, out); err != nil {
		return h.fail(fmt.Errorf("%w: %s reply: %v", ErrProtocol, what, err))
	}
	return nil
}

// receive waits for one message and decodes it into out. A host that dies,
// misses the deadline, or is abandoned because ctx ended is killed: a late
// reply would answer the wrong request.
func (h *Host) receive(ctx context.Context, timeout time.Duration, what string, out any) error {
	deadline := time.Now().Add(timeout)
	for {
		wait := min(time.Until(deadline), pollSlice)
		polled, err := h.poller.Poll(max(wait, 0))
		if err != nil {
			return h.fail(fmt.Errorf("%w: poll: %v", ErrProtocol, err))
		}
		if len(polled) > 0 {
			b, err := h.sock.RecvBytes(0)
			if err != nil {
				return h.fail(fmt.Errorf("%w: receive: %v", ErrProtocol, err))
			}
			if err := msgpack.Unmarshal(b, out); err != nil {
				return h.fail(fmt.Errorf("%w: %s reply: %v", ErrProtocol, what, err))
			}
			return nil
		}
		select {
		case <-h.exited:
			return h.fail(h.exitError(what))
		case <-ctx.Done():
			return h.fail(fmt.Errorf("%s: %w", what, ctx.Err()))
		default:
		}
		if !time.Now().Before(deadline) {
			return h.fail(fmt.Errorf("%w: no answer to %s within %v (killed)", ErrTimeout, what, timeout))
		}
	}
}

func (h *Host) exitError(what string) error {
	msg := fmt.Sprintf("%v during %s", h.cmd.ProcessState, what)
	if last := h.output.last(); last != "" {
		msg += ": " + last
	}
	return fmt.Errorf("%w (%s)", ErrExited, msg)
}

// fail marks the host unusable with err, kills it, and returns err.
func (h *Host) fail(err error) error {
	if h.broken == nil {
		h.broken = err
		h.kill()
	}
	return err
}

func (h *Host) usable() error {
	switch {
	case h.closed:
		return ErrClosed
	case h.broken != nil:
		return fmt.Errorf("pyenv: %s: host unusable after an earlier failure: %w", h.cfg.Module, h.broken)
	}
	return nil
}

// kill ends the host's process group at once and waits for the process.
func (h *Host) kill() {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	select {
	case <-h.exited:
		return
	default:
	}
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	_ = h.cmd.Process.Kill()
	<-h.exited
}

// closeWait bounds how long Close waits for a host to exit by itself.
const closeWait = 2 * time.Second

// Close asks the host to close its environments and exit, kills it if it
// does not within two seconds, and removes its socket directory.
func (h *Host) Close() error {
	if h.closed {
		return nil
	}
	var err error
	if h.broken == nil {
		var ok struct{}
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		err = h.call(ctx, closeWait, "close", closeRequest{Op: "close"}, &ok)
		cancel()
		select {
		case <-h.exited:
		case <-time.After(closeWait):
		}
	}
	h.kill()
	h.closed = true
	h.release()
	if err != nil {
		return fmt.Errorf("pyenv: %s: close: %w", h.cfg.Module, err)
	}
	return nil
}

// release closes the socket and removes the directory.
func (h *Host) release() {
	if h.sock != nil {
		_ = h.sock.Close()
		h.sock = nil
	}
	if h.dir != "" {
		_ = os.RemoveAll(h.dir)
		h.dir = ""
	}
}

// outputLog logs the host's stdout and stderr line by line and keeps the
// last line, which names the exception of a Python process that died.
type outputLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	partial []byte
	lastOut string
}

func (o *outputLog) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(o.partial[:i]), "\r")
		o.partial = o.partial[i+1:]
		o.log.Info("python: " + line)
		if strings.TrimSpace(line) != "" {
			o.lastOut = strings.TrimSpace(line)
		}
	}
	return len(p), nil
}

func (o *outputLog) last() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := strings.TrimSpace(string(o.partial)); s != "" {
		return s
	}
	return o.lastOut
}

// window holds the last infoWindow values of one info key.
type window struct {
	vals [infoWindow]float64
	next int
	n    int
}

func (w *window) add(v float64) {
	w.vals[w.next] = v
	w.next = (w.next + 1) % infoWindow
	w.n = min(w.n+1, infoWindow)
}

func (w *window) mean() float64 {
	var s float64
	for _, v := range w.vals[:w.n] {
		s += v
	}
	return s / float64(w.n)
}

// actingRows reads an acting tensor (uint8 [k, agents]) into one []bool
// per environment, or k nils where it is absent (every agent acts). A row
// with no agent acting is refused unless ended(i) says that environment's
// episode is over (nil: none is): nobody would ever act in it again.
func actingRows(t api.Tensor[uint8], k, a int, ended func(i int) bool) ([][]bool, error) {
	out := make([][]bool, k)
	if t.IsZero() {
		return out, nil
	}
	if !slices.Equal(t.Shape, []int{k, a}) {
		return nil, fmt.Errorf("acting of shape %v, want [%d %d]", t.Shape, k, a)
	}
	for i := range k {
		row := make([]bool, a)
		for j := range a {
			row[j] = t.Data[i*a+j] != 0
		}
		if !slices.Contains(row, true) && (ended == nil || !ended(i)) {
			return nil, fmt.Errorf("environment %d of the batch says no agent acts next", i)
		}
		out[i] = row
	}
	return out, nil
}
