package stream

import (
	"errors"
	"fmt"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

// Wire keys of the inference messages (see the package documentation).
const (
	keyIDs       = "ids"
	keyObs       = "obs"
	keyInference = "inference"
	keyError     = "error"
)

// maxRefusalLen bounds the refusal message a client keeps from a reply.
const maxRefusalLen = 1024

// encodePair writes the map {keyA: valueA, keyB: valueB}, the values
// written by encA and encB. (Keys and functions are separate arguments, not
// structs, so that escape analysis keeps the functions on the stack.)
func encodePair(e *msgpack.Encoder, keyA string, encA func(*msgpack.Encoder) error,
	keyB string, encB func(*msgpack.Encoder) error) error {
	if err := e.EncodeMapLen(2); err != nil {
		return err
	}
	if err := e.EncodeString(keyA); err != nil {
		return err
	}
	if err := encA(e); err != nil {
		return err
	}
	if err := e.EncodeString(keyB); err != nil {
		return err
	}
	return encB(e)
}

// decodePair reads frame, which must hold one map with exactly the keys
// keyA and keyB, each once, and nothing after it; decA and decB read their
// values. Where decAlt is not nil, keyAlt may stand in for keyB (one of
// them, not both), read by decAlt.
func decodePair(d *zsock.Decoder, frame []byte, keyA string, decA func(*msgpack.Decoder) error,
	keyB string, decB func(*msgpack.Decoder) error, keyAlt string, decAlt func(*msgpack.Decoder) error) error {
	dec, err := d.Reset(frame)
	if err != nil {
		return err
	}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	var haveA, haveB bool
	for range n {
		key, err := d.Key()
		if err != nil {
			return fmt.Errorf("reading key: %w", err)
		}
		switch {
		case string(key) == keyA && !haveA:
			haveA = true
			err = decA(dec)
		case string(key) == keyB && !haveB:
			haveB = true
			err = decB(dec)
		case decAlt != nil && string(key) == keyAlt && !haveB:
			haveB = true
			err = decAlt(dec)
		default:
			// Not skipped: the format has no optional keys, and skipping
			// would buffer whatever a hostile peer put there.
			return fmt.Errorf("unexpected or duplicate key %q", key)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if !haveA || !haveB {
		if decAlt != nil {
			return fmt.Errorf("want keys %q and %q or %q", keyA, keyB, keyAlt)
		}
		return fmt.Errorf("want keys %q and %q", keyA, keyB)
	}
	return d.Finish()
}

// fastWire: decodeRequest and decodeReply try fastPair first, and
// decodeSampleBatch api.SampleBatch.DecodeFast (tests turn it off to hold
// the general decoder against them).
var fastWire = true

// fastPair decodes frame where it is exactly what encodePair writes for
// keyA and keyB (a map of the two, in that order, keys as fixstr) and
// decA and decB take their values in their fast form (api's DecodeFast)
// with nothing left after; false for anything else, which the caller then
// decodes with decodePair. An inference round trip decodes two messages;
// through msgpack's Decoder they were 17% of the CPU of an actor and its
// colocated policy worker (requests of 8 rows).
func fastPair(frame []byte, keyA string, decA func([]byte) ([]byte, bool), keyB string, decB func([]byte) ([]byte, bool)) bool {
	if len(frame) == 0 || frame[0] != 0x82 {
		return false
	}
	rest, ok := fastFixKey(frame[1:], keyA)
	if !ok {
		return false
	}
	if rest, ok = decA(rest); !ok {
		return false
	}
	if rest, ok = fastFixKey(rest, keyB); !ok {
		return false
	}
	return fastWhole(rest, decB)
}

// fastWhole reports whether decode took all of frame in its fast form.
func fastWhole(frame []byte, decode func([]byte) ([]byte, bool)) bool {
	rest, ok := decode(frame)
	return ok && len(rest) == 0
}

// fastFixKey reads key, written as a fixstr, from the front of b.
func fastFixKey(b []byte, key string) ([]byte, bool) {
	n := len(key)
	if len(b) < 1+n || b[0] != 0xa0|byte(n) || string(b[1:1+n]) != key {
		return nil, false
	}
	return b[1+n:], true
}

// encodeRequest writes {"ids": ids, "obs": obs}.
func encodeRequest(e *msgpack.Encoder, ids api.Tensor[int64], obs api.Tensor[float32]) error {
	return encodePair(e, keyIDs, ids.EncodeMsgpack, keyObs, obs.EncodeMsgpack)
}

// decodeRequest reads a request into ids and obs (reusing their storage)
// and checks that they describe n >= 1 observations of one dimension.
func decodeRequest(d *zsock.Decoder, frame []byte, ids *api.Tensor[int64], obs *api.Tensor[float32]) error {
	if !(fastWire && fastPair(frame, keyIDs, ids.DecodeFast, keyObs, obs.DecodeFast)) {
		err := decodePair(d, frame, keyIDs, ids.DecodeMsgpack, keyObs, obs.DecodeMsgpack, "", nil)
		if err != nil {
			return err
		}
	}
	if len(ids.Shape) != 1 || ids.Shape[0] < 1 {
		return fmt.Errorf("ids has shape %v, want [n] with n >= 1", ids.Shape)
	}
	if len(obs.Shape) != 2 || obs.Shape[0] != ids.Shape[0] || obs.Shape[1] < 1 {
		return fmt.Errorf("obs has shape %v, want [%d, d] with d >= 1", obs.Shape, ids.Shape[0])
	}
	return nil
}

// encodeReply writes {"ids": ids, "inference": inf}.
func encodeReply(e *msgpack.Encoder, ids api.Tensor[int64], inf *api.Inference) error {
	return encodePair(e, keyIDs, ids.EncodeMsgpack,
		keyInference, inf.EncodeMsgpack)
}

// encodeRefusal writes {"ids": ids, "error": msg}: the server will not
// answer these requests, and says why.
func encodeRefusal(e *msgpack.Encoder, ids api.Tensor[int64], msg string) error {
	return encodePair(e, keyIDs, ids.EncodeMsgpack,
		keyError, func(e *msgpack.Encoder) error { return e.EncodeString(msg) })
}

// decodeReply reads a reply into ids and inf (reusing their storage) and
// checks that the inference answers every id. A refusal leaves inf empty
// and returns the server's reason, never "".
func decodeReply(d *zsock.Decoder, frame []byte, ids *api.Tensor[int64], inf *api.Inference) (refusal string, err error) {
	// inf's storage is reused; fields absent from the message decode as
	// zero (api.Inference.DecodeMsgpack), not as the previous reply's.
	var refused bool // a refusal is never in the fast form
	if !(fastWire && fastPair(frame, keyIDs, ids.DecodeFast, keyInference, inf.DecodeFast)) {
		err = decodePair(d, frame, keyIDs, ids.DecodeMsgpack,
			keyInference, inf.DecodeMsgpack,
			keyError, func(dec *msgpack.Decoder) (err error) {
				refused = true
				refusal, err = dec.DecodeString()
				return err
			})
		if err != nil {
			return "", err
		}
	}
	if len(ids.Shape) != 1 {
		return "", fmt.Errorf("ids has shape %v, want [n]", ids.Shape)
	}
	if refused {
		*inf = api.Inference{}
		if refusal == "" {
			return "", errors.New("error is empty")
		}
		if len(refusal) > maxRefusalLen {
			refusal = refusal[:maxRefusalLen]
		}
		return refusal, nil
	}
	return "", checkInference(inf, ids.Shape[0])
}

// decodeSampleBatch reads one sample batch from frame into b and
// validates it.
func decodeSampleBatch(d *zsock.Decoder, frame []byte, b *api.SampleBatch) error {
	// A sink or a trainer decodes every batch: the form distrl's actors
	// write first, straight from the frame (api.SampleBatch.DecodeFast).
	if !(fastWire && fastWhole(frame, b.DecodeFast)) {
		dec, err := d.Reset(frame)
		if err != nil {
			return err
		}
		if err := b.DecodeMsgpack(dec); err != nil { // the codec itself, not found through reflection
			return err
		}
		if err := d.Finish(); err != nil {
			return err
		}
	}
	return b.Validate()
}

// checkInference reports whether inf answers exactly n observations: one of
// Actions [n] and ContActions [n, a], and LogProbs and Values [n] or absent.
func checkInference(inf *api.Inference, n int) error {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"actions", inf.Actions.Validate()},
		{"cont_actions", inf.ContActions.Validate()},
		{"logprobs", inf.LogProbs.Validate()},
		{"values", inf.Values.Validate()},
	} {
		if c.err != nil {
			return fmt.Errorf("%s: %w", c.name, c.err)
		}
	}
	disc, cont := !inf.Actions.IsZero(), !inf.ContActions.IsZero()
	switch {
	case disc && cont:
		return errors.New("both actions and cont_actions are set")
	case disc:
		if len(inf.Actions.Shape) != 1 || inf.Actions.Shape[0] != n {
			return fmt.Errorf("actions has shape %v, want [%d]", inf.Actions.Shape, n)
		}
	case cont:
		if len(inf.ContActions.Shape) != 2 || inf.ContActions.Shape[0] != n {
			return fmt.Errorf("cont_actions has shape %v, want [%d, act_dim]", inf.ContActions.Shape, n)
		}
	case n > 0:
		return errors.New("neither actions nor cont_actions is set")
	}
	for _, c := range []struct {
		name  string
		shape []int
		zero  bool
	}{
		{"logprobs", inf.LogProbs.Shape, inf.LogProbs.IsZero()},
		{"values", inf.Values.Shape, inf.Values.IsZero()},
	} {
		if !c.zero && (len(c.shape) != 1 || c.shape[0] != n) {
			return fmt.Errorf("%s has shape %v, want [%d]", c.name, c.shape, n)
		}
	}
	return nil
}

// replyRows reads the rows of an inference that passed checkInference. It
// looks at the tensors once per reply, not once per row: a reply of 512
// rows read through the tensors' checks per row cost a policy worker's
// client 3% of a round trip.
type replyRows struct {
	version                int64
	actions                []int32
	logProbs, values, cont []float32
	width                  int // of a row of cont
}

func rowsOf(inf *api.Inference) replyRows {
	rr := replyRows{version: inf.Version}
	// An absent tensor has no data; a present one n values (checkInference).
	if !inf.Actions.IsZero() {
		rr.actions = inf.Actions.Data
	}
	if !inf.LogProbs.IsZero() {
		rr.logProbs = inf.LogProbs.Data
	}
	if !inf.Values.IsZero() {
		rr.values = inf.Values.Data
	}
	if !inf.ContActions.IsZero() && inf.ContActions.Shape[1] > 0 {
		rr.cont, rr.width = inf.ContActions.Data, inf.ContActions.Shape[1]
	}
	return rr
}

// at is row i. ContAction is a fresh copy: the caller keeps it after the
// inference is reused.
func (rr *replyRows) at(i int) InferenceResult {
	r := InferenceResult{Version: rr.version}
	if rr.actions != nil {
		r.Action = rr.actions[i]
	}
	if rr.cont != nil {
		r.ContAction = append([]float32(nil), rr.cont[i*rr.width:(i+1)*rr.width]...)
	}
	if rr.logProbs != nil {
		r.LogProb = rr.logProbs[i]
	}
	if rr.values != nil {
		r.Value = rr.values[i]
	}
	return r
}

// inferenceRows is the view of rows [start, start+n) of inf, sharing its
// storage; shape1 and shape2 are scratch for the views' shapes.
func inferenceRows(inf *api.Inference, start, n int, shape1 *[1]int, shape2 *[2]int) api.Inference {
	shape1[0] = n
	v := api.Inference{Version: inf.Version}
	if !inf.Actions.IsZero() {
		v.Actions = api.Tensor[int32]{Shape: shape1[:], Data: inf.Actions.Data[start : start+n]}
	}
	if !inf.ContActions.IsZero() {
		a := inf.ContActions.Shape[1]
		shape2[0], shape2[1] = n, a
		v.ContActions = api.Tensor[float32]{Shape: shape2[:], Data: inf.ContActions.Data[start*a : (start+n)*a]}
	}
	if !inf.LogProbs.IsZero() {
		v.LogProbs = api.Tensor[float32]{Shape: shape1[:], Data: inf.LogProbs.Data[start : start+n]}
	}
	if !inf.Values.IsZero() {
		v.Values = api.Tensor[float32]{Shape: shape1[:], Data: inf.Values.Data[start : start+n]}
	}
	return v
}
