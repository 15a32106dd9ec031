package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/worker/panel"
)

// BenchmarkGroupRequestHosted is one group request ("ping") from a control
// panel in this process to 64, 256, 1024 or 4096 echo workers hosted by one
// `rlctl worker --type echo --count N` process (one loop, one poller over
// all their sockets). Each op is one group request to all N; req/s is N
// requests per op time, to be held against rpc's
// BenchmarkRawDealerRouterPipelined: the same requests on one pipelined
// DEALER/ROUTER pair, the limit of any control plane over ZeroMQ here.
func BenchmarkGroupRequestHosted(b *testing.B) {
	c := newCluster(b)
	for _, n := range []int{64, 256, 1024, 4096} {
		b.Run(fmt.Sprint("workers=", n), func(b *testing.B) {
			c := c.benchTrial(b)
			ctx := ctxFor(b, 5*time.Minute)
			cp, names := c.hostedEchoes(b, ctx, n)
			ping := func() {
				for _, r := range cp.GroupRequest(ctx, names, "ping", nil) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			ping() // every connection up before timing
			var lat benchutil.Latencies
			b.ResetTimer()
			lat.Start(b.N)
			for range b.N {
				lat.Time(ping)
			}
			b.StopTimer()
			lat.ReportRate(b, "ms", b.N*n, "req/s")
		})
	}
}

// hostedEchoes runs n echo workers in one `rlctl worker --count n` process
// (with flags), killed when the benchmark ends, and returns a panel
// connected to them all and their names.
func (c *cluster) hostedEchoes(b *testing.B, ctx context.Context, n int, flags ...string) (*panel.ControlPanel, []string) {
	b.Helper()
	p := c.worker("echo", 0, append([]string{"--count", fmt.Sprint(n)}, flags...)...)
	b.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	cp := c.panel()
	var names []string
	eventually.NoError(b, 2*time.Minute, "every worker registers", func() error {
		var err error
		if names, err = cp.AutoConnect(ctx); err != nil {
			return err
		}
		if len(names) < n {
			return fmt.Errorf("%d of %d workers registered", len(names), n)
		}
		return nil
	})
	return cp, names
}
