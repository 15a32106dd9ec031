package worker

import (
	"errors"

	"github.com/distrl/distrl/rpc"
)

// DecodeConfig decodes a worker type's "configure" kwargs into cfg, a
// pointer to its configuration, with rpc.Args.Decode (strict: a key cfg has
// no field for is an error). Absent and nil kwargs leave cfg as it is,
// defaults included, and so does an empty map. A failure is a bad_arguments
// *rpc.Error reading "<what>: <the decoder's message>", which Configure can
// return as is.
func DecodeConfig(args rpc.Args, what string, cfg any) error {
	err := args.Decode(cfg)
	if re, ok := errors.AsType[*rpc.Error](err); ok {
		return rpc.Errorf(re.Type, "%s: %s", what, re.Message)
	}
	return err
}
