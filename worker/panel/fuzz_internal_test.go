package panel

import (
	"testing"
	"time"

	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/worker/member"
)

// FuzzStatusRecord: any status record value and loop record (JSON from
// etcd, written by whoever can write there) combine into a status or an
// "unreadable" LOST,
// within an allocation bound set by its size; a record the panel accepts
// survives being written again.
func FuzzStatusRecord(f *testing.F) {
	good := member.Status{Name: "actor/0", State: member.StateRunning, Address: "127.0.0.1:1", Host: "h", PID: 7,
		UpdatedMs: 1, Loops: 42, HeartbeatMs: time.Now().UnixMilli(), Warning: "w", Error: "e"}
	for _, s := range []string{
		good.Record(), `{}`, `{"state":"COMPLETED"}`, `{"state":"BOGUS","heartbeat_ms":-1}`,
		`{"heartbeat_ms":9223372036854775807,"loops":-5}`, `{"updated_ms":1e400}`, `[`, `null`,
		`{"name":"` + string(make([]byte, 300)) + `"}`, `{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	} {
		f.Add(s, "127.0.0.1:1")
		f.Add(s, "")
	}
	for _, l := range []string{`{"loops":3,"heartbeat_ms":1,"workers":2}`, `{"loops":"x"}`, `[`} {
		f.Add(`{"state":"RUNNING","loop":"w/0"}`, l)
	}
	f.Fuzz(func(t *testing.T, rec, addr string) {
		mptest.BoundedAlloc(t, []byte(rec+addr), func() {
			// addr doubles as the loop record: whoever can write to etcd
			// can write either.
			st := combineRecords("w/0", addr, rec, map[string]string{"w/0": addr}, time.Now(), time.Second)
			if st.State == "" && rec != "" {
				t.Fatalf("%q: no state: %+v", rec, st)
			}
			if addr == "" && !st.State.Final() && rec != "" {
				t.Fatalf("%q without an address: %s", rec, st.State)
			}
			if parsed, err := member.ParseStatusRecord(rec); err == nil {
				again, err := member.ParseStatusRecord(parsed.Record())
				if err != nil || again != parsed {
					t.Fatalf("%q: written again %q reads %+v, %v", rec, parsed.Record(), again, err)
				}
			}
		})
	})
}
