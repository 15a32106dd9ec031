package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/internal/testsupport/eventually"
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
			p := c.worker("echo", 0, "--count", fmt.Sprint(n))
			defer func() {
				_ = p.cmd.Process.Kill()
				<-p.done
			}()
			panel := c.panel()
			var names []string
			eventually.NoError(b, 2*time.Minute, "every worker registers", func() error {
				var err error
				if names, err = panel.AutoConnect(ctx); err != nil {
					return err
				}
				if len(names) < n {
					return fmt.Errorf("%d of %d workers registered", len(names), n)
				}
				return nil
			})
			ping := func() {
				for _, r := range panel.GroupRequest(ctx, names, "ping", nil) {
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
