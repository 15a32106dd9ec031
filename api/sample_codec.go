package api

import (
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// SampleBatch's and EpisodeStat's wire keys, as their msgpack tags name
// them (the tensors' names they share with Inference are keyActions etc.).
const (
	keyPolicy         = "policy"
	keyPolicyVersion  = "policy_version"
	keyObs            = "obs"
	keyRewards        = "rewards"
	keyTerminated     = "terminated"
	keyTruncated      = "truncated"
	keyBootstrapValue = "bootstrap_value"
	keyEpisodes       = "episodes"
	keyActorID        = "actor_id"
	keyAgentID        = "agent_id"
	keyReturn         = "return"
	keyLength         = "length"

	sampleBatchKeys = 14
)

// EncodeMsgpack implements [msgpack.CustomEncoder]: the map msgpack's
// reflection writes for the struct (every key, in field order), byte for
// byte, without reflection. Every sample batch is encoded by an actor and
// decoded by a trainer, a sink or a replay; reflection and its allocations
// were most of a sink's CPU per CartPole step.
func (b SampleBatch) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeMapLen(sampleBatchKeys); err != nil {
		return err
	}
	if err := encodeStringField(e, keyPolicy, b.Policy); err != nil {
		return err
	}
	if err := e.EncodeString(keyPolicyVersion); err != nil {
		return err
	}
	if err := e.EncodeInt64(b.PolicyVersion); err != nil { // 9 bytes, as reflection writes an int64
		return err
	}
	if err := e.EncodeString(keyObs); err != nil {
		return err
	}
	if err := b.Obs.EncodeMsgpack(e); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyActions, b.Actions); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyContActions, b.ContActions); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyRewards, b.Rewards); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyTerminated, b.Terminated); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyTruncated, b.Truncated); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyLogProbs, b.LogProbs); err != nil {
		return err
	}
	if err := encodeTensorField(e, keyValues, b.Values); err != nil {
		return err
	}
	if err := e.EncodeString(keyBootstrapValue); err != nil {
		return err
	}
	if err := e.EncodeFloat32(b.BootstrapValue); err != nil {
		return err
	}
	if err := e.EncodeString(keyEpisodes); err != nil {
		return err
	}
	if err := encodeEpisodes(e, b.Episodes); err != nil {
		return err
	}
	if err := encodeStringField(e, keyActorID, b.ActorID); err != nil {
		return err
	}
	return encodeStringField(e, keyAgentID, b.AgentID)
}

// encodeEpisodes writes episodes as reflection does: nil as nil, each
// EpisodeStat as the map {return, length}.
func encodeEpisodes(e *msgpack.Encoder, episodes []EpisodeStat) error {
	if episodes == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(episodes)); err != nil {
		return err
	}
	for _, ep := range episodes {
		if err := e.EncodeMapLen(2); err != nil {
			return err
		}
		if err := e.EncodeString(keyReturn); err != nil {
			return err
		}
		if err := e.EncodeFloat32(ep.Return); err != nil {
			return err
		}
		if err := e.EncodeString(keyLength); err != nil {
			return err
		}
		if err := e.EncodeInt32(ep.Length); err != nil { // 5 bytes, as reflection writes an int32
			return err
		}
	}
	return nil
}

// encodeStringField writes a map entry key: s.
func encodeStringField(e *msgpack.Encoder, key, s string) error {
	if err := e.EncodeString(key); err != nil {
		return err
	}
	return e.EncodeString(s)
}

// DecodeMsgpack implements [msgpack.CustomDecoder], as reflection decodes
// the struct: keys in any order, unknown keys skipped, nil as the zero
// batch; and unlike reflection, a field whose key is absent is zero rather
// than left as it was. Decoding into a batch that held an earlier one
// (stream.SampleConsumerOptions.Reuse) reuses its storage: tensors whose
// capacity suffices (see [Tensor.DecodeMsgpack]), the episodes' array,
// and a string equal to the one it replaces, so that a batch from the
// same actor allocates nothing.
func (b *SampleBatch) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeMapLen() // -1: nil
	if err != nil {
		return fmt.Errorf("api: decoding SampleBatch: %w", err)
	}
	if n < 0 {
		*b = SampleBatch{}
		return nil
	}
	// Keys are read into s[:32], values into s[32:]: an error names its key.
	s := getScratch()
	defer putScratch(s)
	var seen SampleBatch // the fields decoded are copied here, the rest stay zero
	for range n {
		key, err := readString(d, s[:32], true)
		if err != nil {
			return fmt.Errorf("api: decoding SampleBatch: key: %w", err)
		}
		switch string(key) {
		case keyPolicy:
			seen.Policy, err = decodeStringLike(d, s[32:], b.Policy)
		case keyPolicyVersion:
			seen.PolicyVersion, err = d.DecodeInt64()
		case keyObs:
			err = b.Obs.DecodeMsgpack(d)
			seen.Obs = b.Obs
		case keyActions:
			err = decodeKept(d, &b.Actions, &seen.Actions)
		case keyContActions:
			err = decodeKept(d, &b.ContActions, &seen.ContActions)
		case keyRewards:
			err = decodeKept(d, &b.Rewards, &seen.Rewards)
		case keyTerminated:
			err = decodeKept(d, &b.Terminated, &seen.Terminated)
		case keyTruncated:
			err = decodeKept(d, &b.Truncated, &seen.Truncated)
		case keyLogProbs:
			err = decodeKept(d, &b.LogProbs, &seen.LogProbs)
		case keyValues:
			err = decodeKept(d, &b.Values, &seen.Values)
		case keyBootstrapValue:
			seen.BootstrapValue, err = d.DecodeFloat32()
		case keyEpisodes:
			seen.Episodes, err = decodeEpisodes(d, s[32:], b.Episodes[:0])
		case keyActorID:
			seen.ActorID, err = decodeStringLike(d, s[32:], b.ActorID)
		case keyAgentID:
			seen.AgentID, err = decodeStringLike(d, s[32:], b.AgentID)
		default:
			err = d.Skip()
		}
		if err != nil {
			return fmt.Errorf("api: decoding SampleBatch: %s: %w", key, err)
		}
	}
	*b = seen
	return nil
}

// decodeKept decodes a tensor into t, reusing its storage, and copies it
// to kept.
func decodeKept[T Numeric](d *msgpack.Decoder, t, kept *Tensor[T]) error {
	err := t.DecodeMsgpack(d)
	*kept = *t
	return err
}

// decodeStringLike decodes a string as msgpack's DecodeString does (nil
// is ""), returning old itself, not a copy, when the value equals it.
func decodeStringLike(d *msgpack.Decoder, buf []byte, old string) (string, error) {
	n, err := d.DecodeBytesLen()
	if err != nil || n <= 0 {
		return "", err
	}
	v, err := readBytes(d, buf, n)
	if err != nil {
		return "", err
	}
	if string(v) == old {
		return old, nil
	}
	return string(v), nil
}

// maxEpisodesPrealloc bounds the room made for an episodes array before
// its elements arrived: a hostile header may claim billions.
const maxEpisodesPrealloc = 1024

// decodeEpisodes reads an episodes array into out (nil stays nil); each
// element is a map of return and length, other keys skipped.
func decodeEpisodes(d *msgpack.Decoder, buf []byte, out []EpisodeStat) ([]EpisodeStat, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	if out == nil {
		out = make([]EpisodeStat, 0, min(n, maxEpisodesPrealloc))
	}
	for i := range n {
		m, err := d.DecodeMapLen()
		if err != nil {
			return nil, fmt.Errorf("episode %d: %w", i, err)
		}
		var ep EpisodeStat
		for range max(m, 0) {
			key, err := readString(d, buf[:32], true)
			if err != nil {
				return nil, fmt.Errorf("episode %d: key: %w", i, err)
			}
			switch string(key) {
			case keyReturn:
				ep.Return, err = d.DecodeFloat32()
			case keyLength:
				var l int64
				if l, err = d.DecodeInt64(); err == nil && (l < math.MinInt32 || l > math.MaxInt32) {
					err = fmt.Errorf("%d is out of int32's range", l)
				}
				ep.Length = int32(l)
			default:
				err = d.Skip()
			}
			if err != nil {
				return nil, fmt.Errorf("episode %d: %s: %w", i, key, err)
			}
		}
		out = append(out, ep)
	}
	return out, nil
}
