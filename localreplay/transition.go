package localreplay

import (
	"fmt"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

// DecodeTransition decodes one replay item into tr, reusing its storage.
// The item is checked first (zsock.Decoder): a header that claims more than
// the item holds fails before anything is allocated for it.
//
// It reads the map msgpack writes for a Transition key by key, without
// reflection (which was most of a DQN learner's decoding of its sampled
// batches): the same values, but a key the item leaves out is zero, not
// what tr held before, and one it does not know is skipped.
func DecodeTransition(d *zsock.Decoder, item []byte, tr *Transition) error {
	dec, err := d.Reset(item)
	if err != nil {
		return fmt.Errorf("localreplay: transition: %w", err)
	}
	if err := decodeTransition(d, dec, tr); err != nil {
		return fmt.Errorf("localreplay: transition: %w", err)
	}
	return d.Finish()
}

func decodeTransition(zd *zsock.Decoder, d *msgpack.Decoder, tr *Transition) error {
	n, err := d.DecodeMapLen()
	switch {
	case err != nil:
		return err
	case n < 0:
		return fmt.Errorf("got nil, want a map")
	}
	// The arrays are kept for reuse; every other field is what the item
	// says, or zero.
	obs, next, vec := tr.Obs, tr.NextObs, tr.RewardVec
	*tr = Transition{}
	var haveObs, haveNext, haveVec bool
	for range n {
		key, err := zd.Key()
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		switch string(key) {
		case "obs":
			err, haveObs = decodeFrames(zd, d, &obs), true
		case "next_obs":
			err, haveNext = decodeFrames(zd, d, &next), true
		case "reward_vec":
			err, haveVec = vec.DecodeMsgpack(d), true
		case "action":
			tr.Action, err = d.DecodeInt32()
		case "reward":
			tr.Reward, err = zd.Float32()
		case "discount":
			tr.Discount, err = zd.Float32()
		case "n_step_return":
			tr.NStepReturn, err = zd.Float32()
		case "lambda_return":
			tr.LambdaReturn, err = zd.Float32()
		case "priority":
			tr.Priority, err = zd.Float32()
		default:
			err = d.Skip() // bounded: zsock.Decoder checked the lengths
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if haveObs {
		tr.Obs = obs
	}
	if haveNext {
		tr.NextObs = next
	}
	if haveVec {
		tr.RewardVec = vec
	}
	return nil
}

// decodeFrames decodes f straight from the frame where it is in the form
// its encoder writes (most of an item's bytes), else through d.
func decodeFrames(zd *zsock.Decoder, d *msgpack.Decoder, f *api.Frames) error {
	in := zd.Rest()
	if rest, ok := f.DecodeFast(in); ok {
		zd.Skip(len(in) - len(rest))
		return nil
	}
	return f.DecodeMsgpack(d)
}
