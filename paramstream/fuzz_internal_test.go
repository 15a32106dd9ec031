package paramstream

import (
	"bytes"
	"testing"

	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
)

// FuzzDecodeMessages: a notification, fetch request or fetch reply frame,
// whatever it holds, decodes or fails within an allocation bound set by
// its size. Seeds: valid messages and hostile ones claiming gigabytes.
func FuzzDecodeMessages(f *testing.F) {
	for _, v := range []any{
		notification{Policy: "default", Version: 3, Epoch: 7},
		fetchRequest{Policy: "default", MinVersion: 2},
		fetchReply{Policy: "default", Error: CodeNoParams, Message: "none yet"},
	} {
		b, err := encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	reply, err := encodeParamsReply(new(bytes.Buffer), "default", 3, 7, []float32{1, 2, 3})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(reply)
	mptest.Seed(f, mptest.InMaps(mptest.Keys(fetchReply{})...), mptest.InMaps(mptest.Keys(fetchRequest{})...))
	d := newDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			_, _ = d.notification(in)
			_, _ = d.request(in)
			_, _ = d.reply(in)
		})
	})
}
