package shm

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// wait receives the next message on c, sleeping on bell between tries as
// a worker loop does: PrepareWait, poll(2), drain.
func wait(c *Channel, bell *Doorbell, buf []byte) ([]byte, error) {
	for {
		msg, err := c.Recv(buf)
		if msg != nil || err != nil {
			return msg, err
		}
		if c.PrepareWait() {
			unix.Poll([]unix.PollFd{{Fd: int32(bell.Fd()), Events: unix.POLLIN}}, 1000)
			bell.Drain()
		}
	}
}

// BenchmarkChannelRoundTrip is a request and its reply between two threads
// that each sleep on their doorbell until the other's message arrives: the
// cost of the wake-ups a round trip takes (compare rpc.BenchmarkRawREQREP,
// a ZeroMQ round trip, in make bench's table).
func BenchmarkChannelRoundTrip(b *testing.B) {
	l, cl, client, server := pair(b, 0)
	l.Doorbell().Drain()
	req := make([]byte, 200) // an 8-row CartPole request
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var buf []byte
		for range b.N {
			msg, err := wait(server, l.Doorbell(), buf)
			if err == nil {
				err = server.Send(msg)
			}
			if err != nil {
				done <- err
				return
			}
			buf = msg
		}
		done <- nil
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var buf []byte
	var err error
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := client.Send(req); err != nil {
			b.Fatal(err)
		}
		if buf, err = wait(client, cl.Doorbell(), buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
