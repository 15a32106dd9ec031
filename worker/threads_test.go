package worker_test

import (
	"strings"
	"testing"

	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/vmihailenco/msgpack/v5"
)

func TestThreadsDecode(t *testing.T) {
	type config struct {
		Threads worker.Threads `msgpack:"threads"`
	}
	cases := []struct {
		name    string
		value   any
		want    worker.Threads
		wantErr string
	}{
		{"auto", "auto", 0, ""},
		{"one", 1, 1, ""},
		{"uint8", uint8(6), 6, ""},
		{"max", worker.MaxThreads, worker.MaxThreads, ""},
		{"zero", 0, 0, "threads 0: want auto"},
		{"negative", -2, 0, "threads -2: want auto"},
		{"too many", worker.MaxThreads + 1, 0, "want auto or a count from 1 to 256"},
		{"huge unsigned", uint64(1) << 63, 0, "want auto or a count"},
		{"other word", "all", 0, `threads "all": want auto`},
		{"float", 2.5, 0, "threads 2.5: want auto"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := msgpack.Marshal(map[string]any{"threads": c.value})
			if err != nil {
				t.Fatal(err)
			}
			var got config
			err = worker.DecodeConfig(rpc.RawArgs(raw), "thing config", &got)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("decode %v: err %v, want one containing %q", c.value, err, c.wantErr)
				}
				return
			}
			if err != nil || got.Threads != c.want {
				t.Fatalf("decode %v: %v, %v; want %v", c.value, got.Threads, err, c.want)
			}
			// It encodes back to what decodes to the same.
			raw, err = msgpack.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var again config
			if err := msgpack.Unmarshal(raw, &again); err != nil || again != got {
				t.Fatalf("round trip: %v, %v", again, err)
			}
		})
	}
	if n := worker.Threads(0).N(); n != worker.AutoThreads() || n < 1 || n > 8 {
		t.Errorf("auto resolves to %d, AutoThreads %d", n, worker.AutoThreads())
	}
	if n := worker.Threads(3).N(); n != 3 {
		t.Errorf("Threads(3).N() = %d", n)
	}
}
