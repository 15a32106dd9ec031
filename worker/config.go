package worker

import (
	"bytes"

	"github.com/distrl/distrl/rpc"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// DecodeConfig decodes a worker type's "configure" kwargs into cfg, a
// pointer to its configuration, strictly: a key cfg has no field for is an
// error, so that a misspelt key cannot silently leave its default in
// place. Absent and nil kwargs leave cfg as it is, defaults included, and
// so does an empty map. A failure is a bad_arguments *rpc.Error reading
// "<what>: <the decoder's message>", which Configure can return as is.
func DecodeConfig(args rpc.Args, what string, cfg any) error {
	raw := args.Raw()
	if len(raw) == 0 || len(raw) == 1 && raw[0] == msgpcode.Nil {
		return nil
	}
	dec := msgpack.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return rpc.Errorf(rpc.ErrTypeBadArguments, "%s: %v", what, err)
	}
	return nil
}
