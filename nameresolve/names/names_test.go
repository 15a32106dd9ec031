package names

import "testing"

func TestKeys(t *testing.T) {
	tr := NewTrial("cartpole", "t1")
	cases := []struct{ got, want string }{
		{tr.Prefix(), "distrl/cartpole/t1/"},
		{tr.Worker("actor/3"), "distrl/cartpole/t1/worker/actor/3"},
		{tr.Status("policy/0"), "distrl/cartpole/t1/status/policy/0"},
		{tr.Loop("echo/0"), "distrl/cartpole/t1/loop/echo/0"},
		{tr.Stream("sample", "default", 2), "distrl/cartpole/t1/stream/sample/default/2"},
		{tr.Params("default"), "distrl/cartpole/t1/params/default"},
		{Trial{Root: "x", Experiment: "e", Trial: "t"}.WorkerPrefix(), "x/e/t/worker/"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseWorkerName(t *testing.T) {
	cases := []struct {
		in      string
		typ     string
		idx     int
		wantErr bool
	}{
		{"actor/3", "actor", 3, false},
		{"ctl", "ctl", -1, false},
		{"echo/x", "", 0, true},
		{"echo/-1", "", 0, true},
		{"/2", "", 0, true},
	}
	for _, c := range cases {
		typ, idx, err := ParseWorkerName(c.in)
		if (err != nil) != c.wantErr || typ != c.typ || idx != c.idx {
			t.Errorf("ParseWorkerName(%q) = %q, %d, %v", c.in, typ, idx, err)
		}
	}
	if WorkerName("echo", 7) != "echo/7" {
		t.Error("WorkerName")
	}
}
