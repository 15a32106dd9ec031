package pyenv

import (
	"fmt"

	"github.com/distrl/distrl/api"
)

// protocolVersion is the envhost protocol this package speaks
// (distrl/envhost.py's PROTOCOL).
const protocolVersion = 1

// The messages of the envhost protocol (docs/python-envs.md). Requests are
// maps with an "op"; replies are {"ok": ...} or {"error": ...}.

type initRequest struct {
	Op      string         `msgpack:"op"`
	Module  string         `msgpack:"module"`
	Factory string         `msgpack:"factory"`
	Kwargs  map[string]any `msgpack:"kwargs"`
	N       int            `msgpack:"n"`
	Path    []string       `msgpack:"path"`
}

type initReply struct {
	Protocol         int       `msgpack:"protocol"`
	Agents           []string  `msgpack:"agents"`
	ObservationSpace spaceDesc `msgpack:"observation_space"`
	ActionSpace      spaceDesc `msgpack:"action_space"`
	// ActionMask, from an environment whose observations say which actions
	// are available: action i is where the observation holds more than 0.5
	// at ActionMask[i] (api.ActionMasker). Empty: every action always is.
	ActionMask []int  `msgpack:"action_mask"`
	Python     string `msgpack:"python"`
}

// spaceDesc is a space as the host describes it: gymnasium's class name
// and attributes.
type spaceDesc struct {
	Kind  string              `msgpack:"kind"`
	N     int                 `msgpack:"n"`
	Nvec  []int               `msgpack:"nvec"`
	Shape []int               `msgpack:"shape"`
	Low   api.Tensor[float32] `msgpack:"low"`
	High  api.Tensor[float32] `msgpack:"high"`
}

type batchRequest struct {
	Op        string  `msgpack:"op"`
	ResetEnvs []int   `msgpack:"reset_envs"`
	Seeds     []int64 `msgpack:"seeds"`
	StepEnvs  []int   `msgpack:"step_envs"`
	// Actions is an api.Tensor[int64] [k, agents] for a Discrete action
	// space, an api.Tensor[float32] [k, agents, d] for a Box.
	Actions any `msgpack:"actions"`
}

type batchReply struct {
	ResetObs api.Tensor[float32] `msgpack:"reset_obs"`
	// ResetActing is uint8 [r, agents], 1 for each agent whose action the
	// first step applies, from an environment whose agents take turns;
	// absent from one whose agents all act at every step.
	ResetActing api.Tensor[uint8] `msgpack:"reset_acting"`
	Step        *stepReply        `msgpack:"step"`
}

type stepReply struct {
	Obs        api.Tensor[float32] `msgpack:"obs"`
	Rewards    api.Tensor[float32] `msgpack:"rewards"`
	Terminated api.Tensor[uint8]   `msgpack:"terminated"`
	Truncated  api.Tensor[uint8]   `msgpack:"truncated"`
	// Acting is as batchReply.ResetActing, for the next step.
	Acting api.Tensor[uint8] `msgpack:"acting"`
	// Info holds the numeric info values per key, one per stepped
	// environment (NaN where an environment did not report the key).
	Info map[string]api.Tensor[float64] `msgpack:"info"`
}

type closeRequest struct {
	Op string `msgpack:"op"`
}

// hostError is the "error" of a reply.
type hostError struct {
	Type      string `msgpack:"type"`
	Message   string `msgpack:"message"`
	Traceback string `msgpack:"traceback"`
}

// observationSpace converts the host's description of an observation
// space: a Box as it is, a Discrete as one number, a MultiDiscrete as a Box of its integers.
func observationSpace(d spaceDesc) (api.Space, error) {
	switch d.Kind {
	case "Box":
		return boxSpace(d)
	case "Discrete":
		return api.NewDiscrete(d.N), nil
	case "MultiDiscrete":
		s := api.Space{Kind: api.Box, Shape: []int{len(d.Nvec)}}
		for _, n := range d.Nvec {
			s.Low = append(s.Low, 0)
			s.High = append(s.High, float32(n-1))
		}
		return s, s.Validate()
	}
	return api.Space{}, fmt.Errorf("%w: observation space %s (Box, Discrete and MultiDiscrete are)", ErrUnsupportedSpace, d.Kind)
}

// actionSpace converts the host's description of an action space: distrl's
// policies act in Discrete and Box spaces only.
func actionSpace(d spaceDesc) (api.Space, error) {
	switch d.Kind {
	case "Box":
		return boxSpace(d)
	case "Discrete":
		s := api.NewDiscrete(d.N)
		return s, s.Validate()
	}
	return api.Space{}, fmt.Errorf("%w: action space %s (Discrete and Box are)", ErrUnsupportedSpace, d.Kind)
}

func boxSpace(d spaceDesc) (api.Space, error) {
	s := api.Space{Kind: api.Box, Shape: d.Shape, Low: d.Low.Data, High: d.High.Data}
	if err := s.Validate(); err != nil {
		return api.Space{}, fmt.Errorf("%w: Box: %v", ErrUnsupportedSpace, err)
	}
	return s, nil
}
