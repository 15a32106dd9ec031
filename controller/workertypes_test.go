package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// TestCheckWorkers: counts past the bounds are refused before any check;
// each group's first and last worker are checked with the kwargs they
// would be configured with (checkpoint_dir included); the first refusal
// names the group's key and the worker.
func TestCheckWorkers(t *testing.T) {
	var checked []string
	check := func(typ string) func(rpc.Args, int) error {
		return func(args rpc.Args, index int) error {
			var kw map[string]any
			if err := args.Decode(&kw); err != nil {
				return err
			}
			checked = append(checked, fmt.Sprintf("%s/%d %v", typ, index, kw["checkpoint_dir"]))
			if kw["bad"] == true || kw["bad_index"] == fmt.Sprint(index) {
				return rpc.Errorf(rpc.ErrTypeBadArguments, "%s config: key \"bad\": no", typ)
			}
			return nil
		}
	}
	types := worker.NewRegistry()
	for _, typ := range []worker.Type{
		{Name: "actor", Spec: member.Spec{Check: check("actor")}},
		{Name: "trainer", Spec: member.Spec{Check: check("trainer"), CheckpointDir: func(base, group string, i int) string { return fmt.Sprintf("%s/%s%d", base, group, i) }, Grouped: true}},
		{Name: "echo"},
	} {
		typ.New = func(worker.Info) (worker.Impl, error) { return nil, errors.New("not made here") }
		if err := types.Add(typ); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		yaml    string
		want    string   // error text; "" none
		checked []string // the checks made, in order
	}{
		{"fine", "workers: {trainer: {count: 1}, actor: {count: 3}, echo: {count: 5}}", "",
			[]string{"trainer/0 /ck/trainer0", "actor/0 <nil>", "actor/2 <nil>"}},
		{"empty group", "workers: {actor: {count: 0}, trainer: {count: 1}}", "", []string{"trainer/0 /ck/trainer0"}},
		{"refused", "workers: {actor: {count: 2, config: {bad: true}}}",
			`workers.actor.config (actor/0): actor config: key "bad": no`, []string{"actor/0 <nil>"}},
		{"the last refused", "workers: {actor: {count: 4, config: {bad_index: '3'}}}",
			`workers.actor.config (actor/3): actor config`, []string{"actor/0 <nil>", "actor/3 <nil>"}},
		{"too many workers", "workers: {echo: {count: 65537, per_process: 256}}", "workers.echo.count: 65537: the trial would have", nil},
		{"too many processes", "workers: {echo: {count: 4000}, actor: {count: 97}}", "workers.echo.count: 4000: the trial would have 4097", nil},
		{"hosted, within", "workers: {echo: {count: 65536, per_process: 256}}", "", nil},
		{"a group hosted in one process", "workers: {trainer: {count: 2, per_process: 2}}", "workers.trainer.per_process: 2: the 2 trainer workers learn as one group", nil},
		{"a group's members in processes of their own", "workers: {trainer: {count: 2, per_process: 1}}", "",
			[]string{"trainer/0 /ck/trainer0", "trainer/1 /ck/trainer1"}},
		{"a group's members colocated", "workers: {actor: {count: 2}, trainer: {count: 2, colocate: actor}}", "workers.trainer.per_process: 0: the 2 trainer workers learn as one group", nil},
		{"colocated on CUDA, hosts on the CPU", "workers: {actor: {count: 1}, echo: {count: 1, colocate: actor, config: {device: 'cuda:0'}}}",
			"workers.echo.colocate: actor: echo is on a CUDA device and actor on the CPU", []string{"actor/0 <nil>"}},
		{"colocated on CUDA with hosts on CUDA", "workers: {actor: {count: 1, config: {device: 'cuda:0'}}, echo: {count: 1, colocate: actor, config: {device: 'cuda:0'}}}", "",
			[]string{"actor/0 <nil>"}},
		{"colocated processes are not counted", "workers: {echo: {count: 4096}, actor: {count: 4096, colocate: echo}}", "",
			[]string{"actor/0 <nil>", "actor/4095 <nil>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checked = nil
			cfg, err := experiment.Parse([]byte("name: t\n" + tt.yaml + "\nstart_order: [trainer, actor, echo]\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckWorkers(cfg, types, "/ck")
			var wce *WorkerConfigError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckWorkers: %v", err)
			case tt.want != "" && (!errors.As(err, &wce) || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("CheckWorkers: %v, want a *WorkerConfigError starting %q", err, tt.want)
			}
			if !slices.Equal(checked, tt.checked) {
				t.Errorf("checked %q, want %q", checked, tt.checked)
			}
		})
	}
}
