package collective_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/grouptest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	zmq "github.com/pebbe/zmq4"
)

// benchSizes are issue 37's: CartPole's MLP (about 5k parameters),
// MinAtar's network (about 140k) and a network of 1M.
var benchSizes = []struct {
	name string
	n    int
}{{"5k", 5_000}, {"140k", 140_000}, {"1M", 1_000_000}}

// BenchmarkAllreduce times one all-reduce of float32 vectors by 2 and 4
// members, each on its own goroutine with its own links, over the
// collective as trainers use it: through shared memory, as members on one
// node talk, and through ZeroMQ (ipc; DISTRL_SHM=0), as members talk
// without it. BenchmarkRawRing moves the same bytes in the same pattern
// over bare PUSH/PULL sockets: ZeroMQ's limit.
func BenchmarkAllreduce(b *testing.B) {
	repo := workertest.Repo(b)
	for _, transport := range []string{"shm", "zmq"} {
		for _, members := range []int{2, 4} {
			for _, size := range benchSizes {
				b.Run(fmt.Sprintf("members=%d/params=%s/%s", members, size.name, transport), func(b *testing.B) {
					if transport == "zmq" {
						b.Setenv("DISTRL_SHM", "0")
					}
					benchAllreduce(b, repo, members, size.n, fmt.Sprintf("bench-%d-%s-%s", members, size.name, transport))
				})
			}
		}
	}
}

func benchAllreduce(b *testing.B, repo nameresolve.Repository, members, n int, name string) {
	o := opts(repo, name, 0, members)
	o.Logger = slog.New(slog.DiscardHandler) // the output is benchtab's to parse
	ctx := context.Background()
	groups, closeAll, err := grouptest.JoinFormed(workertest.Ctx(b, 10*time.Second), o, members)
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll()
	runMembers(b, members, n, func(r int, x []float32) error {
		return groups[r].AllreduceFloat32(ctx, x)
	})
}

// runMembers runs op b.N times on every member at once, each with its
// own vector of n values, and reports the time of one op and the bytes of
// one vector per second.
func runMembers(b *testing.B, members, n int, op func(rank int, x []float32) error) {
	xs := make([][]float32, members)
	for r := range xs {
		xs[r] = make([]float32, n)
	}
	b.SetBytes(int64(4 * n))
	grouptest.Loop(b, members, func(r int) error { return op(r, xs[r]) })
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/op")
}

// BenchmarkRawRing is the all-reduce's pattern with nothing but the
// transport: 2(members-1) steps, in each of which every member sends a
// chunk of n/members values to its right neighbour over PUSH and receives
// one from its left over PULL (ipc), without headers, checks or sums.
func BenchmarkRawRing(b *testing.B) {
	dir := b.TempDir()
	for _, members := range []int{2, 4} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("members=%d/params=%s", members, size.name), func(b *testing.B) {
				pulls := make([]*zmq.Socket, members)
				pushes := make([]*zmq.Socket, members)
				eps := make([]string, members)
				for r := range members {
					ep := "ipc://" + filepath.Join(dir, fmt.Sprintf("raw-%d-%s-%d", members, size.name, r))
					pull, err := zmq.NewSocket(zmq.PULL)
					if err == nil {
						err = pull.Bind(ep)
					}
					if err != nil {
						b.Fatal(err)
					}
					defer pull.Close()
					pulls[r], eps[r] = pull, ep
				}
				for r := range members {
					push, err := zmq.NewSocket(zmq.PUSH)
					if err == nil {
						err = push.Connect(eps[(r+1)%members])
					}
					if err != nil {
						b.Fatal(err)
					}
					push.SetLinger(0)
					defer push.Close()
					pushes[r] = push
				}
				bufs := make([][]byte, members)
				for r := range bufs {
					bufs[r] = make([]byte, 4*size.n/members)
				}
				runMembers(b, members, size.n, func(r int, x []float32) error {
					buf := bufs[r]
					for range 2 * (members - 1) {
						if _, err := pushes[r].SendBytes(buf, 0); err != nil {
							return err
						}
						if _, err := pulls[r].RecvBytes(0); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}
