package stream

import (
	"strings"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

// A reply is ids with an inference or with a refusal, never both, never
// neither; a refusal's reason is kept, cut to maxRefusalLen.
func TestDecodeReplyRefusals(t *testing.T) {
	ids := api.Tensor[int64]{Shape: []int{2}, Data: []int64{5, 6}}
	inf := api.Inference{Actions: api.Tensor[int32]{Shape: []int{2}, Data: []int32{0, 1}}}
	long := strings.Repeat("x", maxRefusalLen+10)
	cases := []struct {
		name        string
		msg         map[string]any
		wantRefusal string
		wantErr     string
	}{
		{"inference", map[string]any{keyIDs: ids, keyInference: inf}, "", ""},
		{"refusal", map[string]any{keyIDs: ids, keyError: "too long"}, "too long", ""},
		{"long refusal", map[string]any{keyIDs: ids, keyError: long}, long[:maxRefusalLen], ""},
		{"empty refusal", map[string]any{keyIDs: ids, keyError: ""}, "", "error is empty"},
		{"both", map[string]any{keyIDs: ids, keyInference: inf, keyError: "no"}, "", "unexpected or duplicate key"},
		{"neither", map[string]any{keyIDs: ids}, "", `want keys "ids" and "inference" or "error"`},
		{"refusal not a string", map[string]any{keyIDs: ids, keyError: 3}, "", "error:"},
		{"refusal without ids", map[string]any{keyError: "no", "x": 1}, "", "unexpected or duplicate key"},
	}
	d := zsock.NewDecoder()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := msgpack.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs api.Tensor[int64]
			var gotInf api.Inference
			refusal, err := decodeReply(d, frame, &gotIDs, &gotInf)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
			case refusal != tc.wantRefusal:
				t.Fatalf("refusal %.40q (%d bytes), want %.40q (%d)", refusal, len(refusal), tc.wantRefusal, len(tc.wantRefusal))
			}
		})
	}
	// A request never takes the error key.
	frame, err := msgpack.Marshal(map[string]any{keyIDs: ids, keyError: "no"})
	if err != nil {
		t.Fatal(err)
	}
	var obs api.Tensor[float32]
	var reqIDs api.Tensor[int64]
	if err := decodeRequest(d, frame, &reqIDs, &obs); err == nil {
		t.Error("a request with an error key decoded")
	}
}
