package worker_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/vmihailenco/msgpack/v5"
)

func TestDecodeConfig(t *testing.T) {
	type config struct {
		Name  string `msgpack:"name"`
		Count int    `msgpack:"count"`
	}
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	defaults := config{Name: "default", Count: 7}
	cases := []struct {
		name    string
		raw     []byte
		want    config
		wantErr string // prefix of the bad_arguments message; "" = no error
	}{
		{"absent", nil, defaults, ""},
		{"nil", []byte{0xc0}, defaults, ""},
		{"empty map", enc(map[string]any{}), defaults, ""},
		{"some keys", enc(map[string]any{"count": 3}), config{Name: "default", Count: 3}, ""},
		{"all keys", enc(map[string]any{"name": "x", "count": 1}), config{Name: "x", Count: 1}, ""},
		{"misspelt key", enc(map[string]any{"cuont": 3}), config{}, `thing config: unknown key "cuont" (known: count, name)`},
		{"wrong type", enc(map[string]any{"count": "three"}), config{}, `thing config: key "count": want an integer, got "three"`},
		{"wrong type after good", enc(map[string]any{"name": "x", "count": "three"}), config{}, `thing config: key "count": `},
		{"not a map", enc("name"), config{}, "thing config: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := defaults
			err := worker.DecodeConfig(rpc.RawArgs(c.raw), "thing config", &got)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Fatalf("decoded %+v, want %+v", got, c.want)
				}
				return
			}
			var rerr *rpc.Error
			if !errors.As(err, &rerr) || rerr.Type != rpc.ErrTypeBadArguments || !strings.HasPrefix(rerr.Message, c.wantErr) {
				t.Fatalf("error %v, want a bad_arguments error starting %q", err, c.wantErr)
			}
		})
	}
}

func TestInfoLog(t *testing.T) {
	l := slog.New(slog.DiscardHandler)
	cases := []struct {
		name string
		info worker.Info
		want *slog.Logger
	}{
		{"nil logger", worker.Info{}, slog.Default()},
		{"own logger", worker.Info{Logger: l}, l},
	}
	for _, c := range cases {
		if got := c.info.Log(); got != c.want {
			t.Errorf("%s: Log() = %p, want %p", c.name, got, c.want)
		}
	}
}
