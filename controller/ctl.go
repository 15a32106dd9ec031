package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/member"
)

// serveCtl runs the controller's own server and records: the trial's
// member "ctl", which answers ping, status, stats, interrupt and exit.
func (c *Controller) serveCtl(ctx context.Context) error {
	mux := rpc.NewMux()
	srv, err := rpc.NewServer(rpc.ServerOptions{Host: c.opts.Host, Curve: c.opts.Curve, Logger: c.log, Mux: mux})
	if err != nil {
		return fmt.Errorf("controller: server: %w", err)
	}
	srv.Route(CtlName, mux) // panels name the member they ask
	c.ctl = srv
	status := member.ProcessStatus(CtlName, member.StateRunning, srv.Addr(), time.Now())
	std := member.Commands{
		Status: func() member.Status { return status },
		Stats:  c.lastMetrics,
		Stop: func(final member.State) member.Status {
			req := stopRequest{outcome: Completed, reason: "stopped by request"}
			if final == member.StateInterrupted {
				req = stopRequest{outcome: Interrupted, reason: "interrupted by request"}
			}
			select {
			case c.stopReq <- req:
			default: // a stop is already pending
			}
			return status
		},
	}
	if err := std.Register(mux); err != nil {
		return fmt.Errorf("controller: server: %w", err)
	}
	go func() {
		// Serve ends when shutdown closes the server; ctx is not used
		// because the controller must answer while it stops.
		if err := srv.Serve(context.Background()); err != nil && !errors.Is(err, rpc.ErrClosed) {
			c.log.Debug("controller server stopped", "err", err)
		}
	}()
	// The address record is create-only, so two controllers of one trial
	// cannot both run even if they race past clearStaleRecords.
	if err := c.repo.Add(ctx, c.trial.Worker(CtlName), srv.Addr(), nameresolve.AddOptions{TTL: c.opts.WorkerTTL}); err != nil {
		if errors.Is(err, nameresolve.ErrKeyExists) {
			c.owner = false
			return fmt.Errorf("%w (its record is %s)", ErrControllerRunning, c.trial.Worker(CtlName))
		}
		return fmt.Errorf("controller: register: %w", err)
	}
	if err := c.repo.Add(ctx, c.trial.Status(CtlName), status.Record(), nameresolve.AddOptions{TTL: c.opts.WorkerTTL, Replace: true}); err != nil {
		return fmt.Errorf("controller: register: %w", err)
	}
	return nil
}

func (c *Controller) lastMetrics() any {
	c.lastMu.Lock()
	defer c.lastMu.Unlock()
	out := map[string]any{}
	if c.last != nil {
		// Metrics carries json tags only: hand msgpack the JSON form.
		b, err := json.Marshal(c.last)
		if err == nil {
			_ = json.Unmarshal(b, &out)
		}
	}
	return out
}

func pidString(h Handle) string {
	if h == nil || h.PID() == 0 {
		return "-"
	}
	return strconv.Itoa(h.PID())
}
