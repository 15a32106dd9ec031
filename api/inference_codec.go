package api

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Inference's wire keys, as its msgpack tags name them.
const (
	keyActions     = "actions"
	keyContActions = "cont_actions"
	keyLogProbs    = "logprobs"
	keyValues      = "values"
	keyVersion     = "version"
)

// EncodeMsgpack implements [msgpack.CustomEncoder]: the map msgpack's
// reflection writes for the struct (the five keys in field order), byte for
// byte, without reflection. A policy worker encodes one per reply and an
// actor decodes one per reply; reflection was a sixth of an actor's CPU
// with 8 environments per request.
func (inf Inference) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeMapLen(5); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyActions, inf.Actions); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyContActions, inf.ContActions); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyLogProbs, inf.LogProbs); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyValues, inf.Values); err != nil {
		return err
	}
	if err := e.EncodeString(keyVersion); err != nil {
		return err
	}
	return e.EncodeInt64(inf.Version) // always 9 bytes, as reflection writes an int64
}

// DecodeMsgpack implements [msgpack.CustomDecoder], as reflection decodes
// the struct: keys in any order, unknown keys skipped, nil as the zero
// Inference; and unlike reflection, a field whose key is absent is zero
// rather than left as it was. The tensors' storage is reused (see
// [Tensor.DecodeMsgpack]), so that a client decoding every reply into one
// Inference allocates nothing.
func (inf *Inference) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeMapLen() // -1: nil
	if err != nil {
		return fmt.Errorf("api: decoding Inference: %w", err)
	}
	if n < 0 {
		*inf = Inference{}
		return nil
	}
	s := getScratch()
	defer putScratch(s)
	var seen Inference // the fields decoded are copied here, the rest stay zero
	for range n {
		key, err := readString(d, s[:32], true)
		if err != nil {
			return fmt.Errorf("api: decoding Inference: key: %w", err)
		}
		switch string(key) {
		case keyActions:
			err = decodeKept(d, &inf.Actions, &seen.Actions)
		case keyContActions:
			err = decodeKept(d, &inf.ContActions, &seen.ContActions)
		case keyLogProbs:
			err = decodeKept(d, &inf.LogProbs, &seen.LogProbs)
		case keyValues:
			err = decodeKept(d, &inf.Values, &seen.Values)
		case keyVersion:
			seen.Version, err = d.DecodeInt64()
		default:
			err = d.Skip()
		}
		if err != nil {
			return fmt.Errorf("api: decoding Inference: %s: %w", key, err)
		}
	}
	*inf = seen
	return nil
}

// encodeTensorField writes a map entry key: t.
func encodeTensorField[T Numeric](e *msgpack.Encoder, key string, t Tensor[T]) error {
	if err := e.EncodeString(key); err != nil {
		return err
	}
	return t.EncodeMsgpack(e)
}
