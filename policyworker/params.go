package policyworker

import (
	"context"
	"errors"
	"fmt"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
)

// Commands of the policy worker type.
const (
	CmdLoadParams = "load_params"
	CmdGetParams  = "get_params"
)

// LoadParamsArgs are the kwargs of "load_params".
type LoadParamsArgs struct {
	Version int64               `msgpack:"version"`
	Params  api.Tensor[float32] `msgpack:"params"` // flat, [NumParams]
}

// Params is the reply of "get_params".
type Params struct {
	Version int64               `msgpack:"version"`
	Params  api.Tensor[float32] `msgpack:"params"`
}

// LoadParamsReply is the reply of "load_params".
type LoadParamsReply struct {
	Version   int64 `msgpack:"version"`
	NumParams int   `msgpack:"num_params"`
}

// loadNewest fetches and loads the newest published parameters, if a
// publisher exists. A failure is logged, not returned: the worker serves
// with what it has, and Poll keeps following the publisher.
func (w *Worker) loadNewest(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, startupFetchTimeout)
	defer cancel()
	p, err := w.params.Fetch(ctx)
	switch {
	case errors.Is(err, paramstream.ErrNoPublisher):
		w.log.Info("no parameters published yet; following the policy's record")
	case err != nil:
		w.log.Warn("newest published parameters not fetched on configure; trying again between batches", "err", err)
	default:
		w.applyParams(p)
	}
}

// applyParams loads published parameters. A vector that does not fit the
// network (the trainer's configuration differs from this worker's) is
// reported as a warning and leaves the policy as it was: the worker keeps
// serving, and the next version may fit.
func (w *Worker) applyParams(p *paramstream.Params) {
	if err := w.loadParams(p.Version, p.Data); err != nil {
		w.paramWarning = fmt.Sprintf("published parameters version %d not loaded: %v", p.Version, err)
		w.log.Warn("published parameters not loaded", "version", p.Version, "err", err)
		return
	}
	w.paramWarning = ""
}

// Commands adds load_params and get_params.
func (w *Worker) Commands() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		CmdLoadParams: rpc.Typed(func(_ context.Context, a LoadParamsArgs) (LoadParamsReply, error) {
			if err := a.Params.Validate(); err != nil {
				return LoadParamsReply{}, rpc.Errorf(rpc.ErrTypeBadArguments, "params: %v", err)
			}
			if len(a.Params.Shape) != 1 {
				return LoadParamsReply{}, rpc.Errorf(rpc.ErrTypeBadArguments,
					"params has shape %v, want a flat vector", a.Params.Shape)
			}
			if err := w.loadParams(a.Version, a.Params.Data); err != nil {
				return LoadParamsReply{}, err
			}
			return LoadParamsReply{Version: a.Version, NumParams: len(a.Params.Data)}, nil
		}),
		CmdGetParams: func(context.Context, rpc.Args) (any, error) {
			if w.policy == nil {
				return nil, notConfigured(CmdGetParams)
			}
			v, p := w.policy.Params()
			return Params{Version: v, Params: api.Tensor[float32]{Shape: []int{len(p)}, Data: p}}, nil
		},
	}
}

// loadParams makes params (copied) the policy's parameters at version. It
// is the one place parameters change, whoever supplies them; like every
// method it must run on the worker's loop. A vector that does not fit the
// network is a bad_arguments error and changes nothing.
func (w *Worker) loadParams(version int64, params []float32) error {
	if w.policy == nil {
		return notConfigured(CmdLoadParams)
	}
	if err := w.policy.SetParams(version, params); err != nil {
		return rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	w.metrics.Version.Set(float64(version))
	w.log.Info("parameters loaded", "version", version)
	return nil
}

func notConfigured(cmd string) error {
	return rpc.Errorf(worker.ErrTypeBadState, "%s: the policy worker is not configured", cmd)
}
