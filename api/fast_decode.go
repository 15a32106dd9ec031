package api

import (
	"encoding/binary"
	"math"
	"slices"
)

// The fast path of the inference round trip's decoding. DecodeMsgpack reads
// a tensor through msgpack's Decoder, a dozen calls through an io.Reader
// per tensor; an actor and a policy worker in one process (colocated)
// spent 17% of their CPU there with requests of 8 rows, more than on
// stepping CartPole. The DecodeFast methods read the form that
// EncodeMsgpack writes, and nothing else, straight from the frame's bytes,
// and say ok = false for anything else, which is then decoded the general
// way (so that a peer writing any valid msgpack is still understood, and
// errors come from one place). Where they accept an input they decode it
// exactly as DecodeMsgpack does (FuzzDecodeFast holds them to it).

// fastKey reads the string key from b[i:], ok only if it is want.
func fastKey(b []byte, i int, want string) (next int, ok bool) {
	s, next, ok := fastStr(b, i)
	return next, ok && string(s) == want
}

// fastDim reads a dimension written as a positive fixint, uint8, uint16 or
// uint32 of at most MaxInt32.
func fastDim(b []byte, i int) (d, next int, ok bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	switch c := b[i]; {
	case c < 0x80:
		return int(c), i + 1, true
	case c == 0xcc && i+2 <= len(b):
		return int(b[i+1]), i + 2, true
	case c == 0xcd && i+3 <= len(b):
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, true
	case c == 0xce && i+5 <= len(b):
		v := binary.BigEndian.Uint32(b[i+1:])
		if v > 1<<31-1 {
			return 0, 0, false
		}
		return int(v), i + 5, true
	}
	return 0, 0, false
}

// fastBinLen reads a bin8, bin16 or bin32 header: the length of the bytes
// that follow it and their index; ok only if b holds them.
func fastBinLen(b []byte, i int) (n, start int, ok bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	switch c := b[i]; {
	case c == 0xc4 && i+2 <= len(b):
		n, start = int(b[i+1]), i+2
	case c == 0xc5 && i+3 <= len(b):
		n, start = int(binary.BigEndian.Uint16(b[i+1:])), i+3
	case c == 0xc6 && i+5 <= len(b):
		v := binary.BigEndian.Uint32(b[i+1:])
		if uint64(v) > uint64(len(b)) {
			return 0, 0, false
		}
		n, start = int(v), i+5
	default:
		return 0, 0, false
	}
	return n, start, n <= len(b)-start
}

// DecodeFast decodes a tensor from the front of b as DecodeMsgpack would,
// where b starts with one in the form EncodeMsgpack writes (nil, or the map
// of dtype, shape and data in that order); it returns the bytes after it.
// ok is false for anything else, a valid tensor in another form included,
// and t is then left in no particular state: decode b with DecodeMsgpack.
func (t *Tensor[T]) DecodeFast(b []byte) (rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, false
	}
	if b[0] == 0xc0 { // nil: the zero tensor
		*t = Tensor[T]{}
		return b[1:], true
	}
	if b[0] != 0x83 {
		return nil, false
	}
	i, ok := fastKey(b, 1, "dtype")
	if !ok {
		return nil, false
	}
	dtype, i, ok := fastStr(b, i)
	if !ok || !dtypeMatches[T](dtype) {
		return nil, false
	}
	if i, ok = fastKey(b, i, "shape"); !ok || i >= len(b) {
		return nil, false
	}
	var rank int
	switch c := b[i]; {
	case c&0xf0 == 0x90:
		rank, i = int(c&0x0f), i+1
	case c == 0xdc && i+3 <= len(b):
		rank, i = int(binary.BigEndian.Uint16(b[i+1:])), i+3
	default:
		return nil, false
	}
	if rank > MaxRank {
		return nil, false
	}
	if t.Shape != nil && cap(t.Shape) >= rank {
		t.Shape = t.Shape[:rank]
	} else {
		t.Shape = make([]int, rank)
	}
	for k := range t.Shape {
		if t.Shape[k], i, ok = fastDim(b, i); !ok {
			return nil, false
		}
	}
	_, size := dtypeOf[T]()
	want, err := numElements(t.Shape, size)
	if err != nil {
		return nil, false
	}
	if i, ok = fastKey(b, i, "data"); !ok {
		return nil, false
	}
	nbytes, start, ok := fastBinLen(b, i)
	if !ok || nbytes != want*size {
		return nil, false
	}
	data := t.Data[:0]
	if data == nil {
		data = []T{} // an empty tensor has empty, not nil, data, as DecodeMsgpack gives
	}
	data = slices.Grow(data, want)[:want]
	if hostLittleEndian {
		copy(asBytes(data), b[start:start+nbytes])
	} else {
		decodeLittleEndian(data, b[start:start+nbytes])
	}
	t.Data = data
	return b[start+nbytes:], true
}

// DecodeFast decodes an Inference from the front of b as DecodeMsgpack
// would, where b starts with one in the form EncodeMsgpack writes (the
// five keys in its order, each tensor in Tensor.DecodeFast's form, the
// version as an int64); it returns the bytes after it. ok is false for
// anything else, and inf is then left in no particular state.
func (inf *Inference) DecodeFast(b []byte) (rest []byte, ok bool) {
	if len(b) == 0 || b[0] != 0x85 {
		return nil, false
	}
	i, ok := 1, true
	i, ok = fastKept(b, i, ok, keyActions, &inf.Actions, nil)
	i, ok = fastKept(b, i, ok, keyContActions, &inf.ContActions, nil)
	i, ok = fastKept(b, i, ok, keyLogProbs, &inf.LogProbs, nil)
	i, ok = fastKept(b, i, ok, keyValues, &inf.Values, nil)
	if !ok {
		return nil, false
	}
	if i, ok = fastKey(b, i, keyVersion); !ok || i+9 > len(b) || b[i] != 0xd3 {
		return nil, false
	}
	inf.Version = int64(binary.BigEndian.Uint64(b[i+1:]))
	return b[i+9:], true
}

// fastKept reads the key and the tensor t from b[i:] where ok (a chain of
// fields stops at the first that fails), copies t to kept unless nil (as
// decodeKept), and returns the index after it.
func fastKept[T Numeric](b []byte, i int, ok bool, key string, t, kept *Tensor[T]) (next int, _ bool) {
	if !ok {
		return 0, false
	}
	if i, ok = fastKey(b, i, key); !ok {
		return 0, false
	}
	if i, ok = fastValue(b, i, t); ok && kept != nil {
		*kept = *t
	}
	return i, ok
}

// fastStr reads a string in any of msgpack's str forms from b[i:] (a fixstr
// as EncodeString writes a short one; keys padded to align a tensor's data
// as str8, str16 or str32, appendStr); the string and the index after it.
func fastStr(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) {
		return nil, 0, false
	}
	var n, hdr int
	switch c := b[i]; {
	case c&0xe0 == 0xa0:
		n, hdr = int(c&0x1f), 1
	case c == 0xd9 && i+2 <= len(b):
		n, hdr = int(b[i+1]), 2
	case c == 0xda && i+3 <= len(b):
		n, hdr = int(binary.BigEndian.Uint16(b[i+1:])), 3
	case c == 0xdb && i+5 <= len(b):
		v := binary.BigEndian.Uint32(b[i+1:])
		if uint64(v) > uint64(len(b)) {
			return nil, 0, false
		}
		n, hdr = int(v), 5
	default:
		return nil, 0, false
	}
	start := i + hdr
	if n > len(b)-start {
		return nil, 0, false
	}
	return b[start : start+n], start + n, true
}

// fastStringField reads key and its string value from b[i:], returning
// old itself where the value equals it (as decodeStringLike does).
func fastStringField(b []byte, i int, key, old string) (s string, next int, ok bool) {
	if i, ok = fastKey(b, i, key); !ok {
		return "", 0, false
	}
	v, next, ok := fastStr(b, i)
	switch {
	case !ok:
		return "", 0, false
	case string(v) == old:
		return old, next, true
	}
	return string(v), next, true
}

// fastFixed reads key and then a value of code c and n bytes (big-endian)
// after it from b[i:].
func fastFixed(b []byte, i int, key string, c byte, n int) (v uint64, next int, ok bool) {
	if i, ok = fastKey(b, i, key); !ok || i+1+n > len(b) || b[i] != c {
		return 0, 0, false
	}
	for _, x := range b[i+1 : i+1+n] {
		v = v<<8 | uint64(x)
	}
	return v, i + 1 + n, true
}

// DecodeFast decodes a SampleBatch from the front of b as DecodeMsgpack
// would, where b starts with one in the form EncodeMsgpack writes (every
// key in its order, the observations as a tensor rather than packed
// bits, each tensor in Tensor.DecodeFast's form); it returns the bytes
// after it. ok is false for anything else (MinAtar's packed frames
// included), and b is then in no particular state: decode with
// DecodeMsgpack. Storage is reused as DecodeMsgpack reuses it.
func (b *SampleBatch) DecodeFast(in []byte) (rest []byte, ok bool) {
	if len(in) == 0 || in[0] != 0x80|sampleBatchKeys {
		return nil, false
	}
	var seen SampleBatch
	var v uint64
	i := 1
	if seen.Policy, i, ok = fastStringField(in, i, keyPolicy, b.Policy); !ok {
		return nil, false
	}
	if v, i, ok = fastFixed(in, i, keyPolicyVersion, 0xd3, 8); !ok {
		return nil, false
	}
	seen.PolicyVersion = int64(v)
	if i, ok = fastKey(in, i, keyObs); !ok || i >= len(in) || in[i]&0xf0 == 0x90 || in[i] == 0xdc || in[i] == 0xdd {
		return nil, false // packed frames go the general way
	}
	b.Obs.binary = false // a tensor, not packed: the fast path says no to those
	if i, ok = fastValue(in, i, &b.Obs.Tensor); !ok {
		return nil, false
	}
	seen.Obs = b.Obs
	i, ok = fastKept(in, i, ok, keyActions, &b.Actions, &seen.Actions)
	i, ok = fastKept(in, i, ok, keyContActions, &b.ContActions, &seen.ContActions)
	i, ok = fastKept(in, i, ok, keyRewards, &b.Rewards, &seen.Rewards)
	i, ok = fastKept(in, i, ok, keyTerminated, &b.Terminated, &seen.Terminated)
	i, ok = fastKept(in, i, ok, keyTruncated, &b.Truncated, &seen.Truncated)
	i, ok = fastKept(in, i, ok, keyLogProbs, &b.LogProbs, &seen.LogProbs)
	i, ok = fastKept(in, i, ok, keyValues, &b.Values, &seen.Values)
	if !ok {
		return nil, false
	}
	if v, i, ok = fastFixed(in, i, keyBootstrapValue, 0xca, 4); !ok {
		return nil, false
	}
	seen.BootstrapValue = math.Float32frombits(uint32(v))
	if seen.Episodes, i, ok = fastEpisodes(in, i, b.Episodes[:0]); !ok {
		return nil, false
	}
	if seen.ActorID, i, ok = fastStringField(in, i, keyActorID, b.ActorID); !ok {
		return nil, false
	}
	if seen.AgentID, i, ok = fastStringField(in, i, keyAgentID, b.AgentID); !ok {
		return nil, false
	}
	*b = seen
	return in[i:], true
}

// fastValue reads the tensor t at b[i:]; the index after it.
func fastValue[T Numeric](b []byte, i int, t *Tensor[T]) (next int, ok bool) {
	rest, ok := t.DecodeFast(b[i:])
	return len(b) - len(rest), ok
}

// fastEpisodes reads the episodes key and its value, nil or an array of
// {return: float32, length: int32} as encodeEpisodes writes them, into out.
func fastEpisodes(b []byte, i int, out []EpisodeStat) (eps []EpisodeStat, next int, ok bool) {
	if i, ok = fastKey(b, i, keyEpisodes); !ok || i >= len(b) {
		return nil, 0, false
	}
	var n int
	switch c := b[i]; {
	case c == 0xc0:
		return nil, i + 1, true
	case c&0xf0 == 0x90:
		n, i = int(c&0x0f), i+1
	case c == 0xdc && i+3 <= len(b):
		n, i = int(binary.BigEndian.Uint16(b[i+1:])), i+3
	default:
		return nil, 0, false
	}
	if n > (len(b)-i)/19 { // each is 19 bytes: fixmap, return, float32, length, int32
		return nil, 0, false
	}
	if out == nil {
		out = make([]EpisodeStat, 0, n)
	}
	for range n {
		if i >= len(b) || b[i] != 0x82 {
			return nil, 0, false
		}
		r, j, ok := fastFixed(b, i+1, keyReturn, 0xca, 4)
		if !ok {
			return nil, 0, false
		}
		l, j, ok := fastFixed(b, j, keyLength, 0xd2, 4)
		if !ok {
			return nil, 0, false
		}
		out = append(out, EpisodeStat{Return: math.Float32frombits(uint32(r)), Length: int32(uint32(l))})
		i = j
	}
	return out, i, true
}
