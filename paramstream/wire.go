package paramstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

// Record is the name-resolve record of a policy's publisher, stored as
// JSON under trial.Params(policy):
//
//	{"version": 12, "fetch": "10.0.0.5:40123", "notify": "10.0.0.5:40124", "epoch": 81985529216486895}
//
// Epoch identifies one Publisher (one run of a trainer): versions are
// ordered within an epoch only, and the node cache keeps files of
// different epochs apart.
type Record struct {
	Version int64  `json:"version"`
	Fetch   string `json:"fetch"`
	Notify  string `json:"notify"`
	Epoch   uint64 `json:"epoch"`
}

// ParseRecord decodes and checks a record's value.
func ParseRecord(value string) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("paramstream: parameter record %q: %w", value, err)
	}
	if r.Version < 0 || r.Fetch == "" || r.Notify == "" {
		return Record{}, fmt.Errorf("paramstream: parameter record %q: want version >= 0, fetch and notify", value)
	}
	return r, nil
}

func (r Record) encode() string {
	b, _ := json.Marshal(r) // cannot fail: plain strings and numbers
	return string(b)
}

// Wire messages. Each is one msgpack map in one frame (see the package
// documentation). Unknown keys make a message malformed: the format has
// no optional keys, and skipping them would buffer whatever a peer sent.

// notification is what the publisher's PUB socket sends for each version.
type notification struct {
	Policy  string `msgpack:"policy"`
	Version int64  `msgpack:"version"`
	Epoch   uint64 `msgpack:"epoch"`
}

// fetchRequest asks for the newest parameters, at least MinVersion.
type fetchRequest struct {
	Policy     string `msgpack:"policy"`
	MinVersion int64  `msgpack:"min_version"`
}

// fetchReply carries the parameters, or an error code and message.
type fetchReply struct {
	Policy  string              `msgpack:"policy"`
	Version int64               `msgpack:"version"`
	Epoch   uint64              `msgpack:"epoch"`
	Data    api.Tensor[float32] `msgpack:"data,omitempty"`
	Error   string              `msgpack:"error,omitempty"`
	Message string              `msgpack:"message,omitempty"`
}

// encodeParamsReply encodes a reply carrying data into buf, which it
// resets first. Writing into a bytes.Buffer lets api.Tensor align the
// data, which keeps the receiver's copy fast.
func encodeParamsReply(buf *bytes.Buffer, policy string, version int64, epoch uint64, data []float32) ([]byte, error) {
	buf.Reset()
	buf.Grow(4*len(data) + len(policy) + 128)
	enc := msgpack.NewEncoder(buf)
	// Written field by field rather than through fetchReply so that the
	// tensor is the last field, right after its header.
	if err := enc.EncodeMapLen(4); err != nil {
		return nil, err
	}
	for _, kv := range []struct {
		k string
		v any
	}{{"policy", policy}, {"version", version}, {"epoch", epoch}} {
		if err := enc.EncodeString(kv.k); err != nil {
			return nil, err
		}
		if err := enc.Encode(kv.v); err != nil {
			return nil, err
		}
	}
	if err := enc.EncodeString("data"); err != nil {
		return nil, err
	}
	if err := (api.Tensor[float32]{Shape: []int{len(data)}, Data: data}).EncodeMsgpack(enc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decoder decodes one received frame at a time into a wire struct.
type decoder struct {
	frame *zsock.Decoder
}

func newDecoder() *decoder {
	return &decoder{frame: zsock.NewDecoder()}
}

// decode reads exactly one msgpack value from frame into v.
func (d *decoder) decode(frame []byte, v any) error {
	dec, err := d.frame.Reset(frame)
	if err != nil {
		return err
	}
	// Reset clears the flag, so it is set for every message.
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	return d.frame.Finish()
}

func (d *decoder) notification(frame []byte) (notification, error) {
	var n notification
	if err := d.decode(frame, &n); err != nil {
		return notification{}, err
	}
	if n.Policy == "" || n.Version < 0 {
		return notification{}, fmt.Errorf("notification %+v: want a policy and version >= 0", n)
	}
	return n, nil
}

func (d *decoder) request(frame []byte) (fetchRequest, error) {
	var r fetchRequest
	if err := d.decode(frame, &r); err != nil {
		return fetchRequest{}, err
	}
	if r.Policy == "" {
		return fetchRequest{}, errors.New("request without a policy")
	}
	return r, nil
}

// reply decodes a fetch reply and checks that it is either an error or a
// flat parameter vector.
func (d *decoder) reply(frame []byte) (fetchReply, error) {
	var r fetchReply
	// The tensor decoder grows its output a chunk at a time, so that a
	// hostile length cannot make it allocate up front; here the whole
	// frame is in memory already, so room for as many values as it has
	// bytes for is safe, and saves several copies of a large vector.
	r.Data.Data = make([]float32, 0, len(frame)/4)
	if err := d.decode(frame, &r); err != nil {
		return fetchReply{}, err
	}
	switch {
	case r.Policy == "":
		return fetchReply{}, errors.New("reply without a policy")
	case r.Error != "":
		if !r.Data.IsZero() {
			return fetchReply{}, errors.New("reply has both an error and data")
		}
	case r.Data.IsZero():
		return fetchReply{}, errors.New("reply has neither an error nor data")
	case len(r.Data.Shape) != 1:
		return fetchReply{}, fmt.Errorf("data has shape %v, want a flat vector", r.Data.Shape)
	case r.Version < 0:
		return fetchReply{}, fmt.Errorf("data of version %d", r.Version)
	}
	return r, nil
}

func encode(v any) ([]byte, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	return b, nil
}
