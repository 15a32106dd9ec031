package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/distrl/distrl/nameresolve"
)

// statusWriter stores status records off the worker loop, so a slow or
// restarting etcd never stalls the work. Only the newest status matters:
// publishing replaces one that is still waiting.
type statusWriter struct {
	repo nameresolve.Repository
	key  string
	ttl  time.Duration
	log  *slog.Logger

	pending chan Status
	stop    chan struct{}
	done    chan struct{}
}

func newStatusWriter(repo nameresolve.Repository, key string, ttl time.Duration, log *slog.Logger) *statusWriter {
	sw := &statusWriter{
		repo: repo, key: key, ttl: ttl, log: log,
		pending: make(chan Status, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go sw.run()
	return sw
}

// publish queues s, replacing an older status not yet written.
func (sw *statusWriter) publish(s Status) {
	for {
		select {
		case sw.pending <- s:
			return
		default:
		}
		select {
		case <-sw.pending:
		default:
		}
	}
}

func (sw *statusWriter) run() {
	defer close(sw.done)
	for {
		select {
		case <-sw.stop:
			return
		case s := <-sw.pending:
			sw.writeUntilDone(s)
		}
	}
}

// writeUntilDone retries s every second until it is stored, a newer status
// replaces it, or the writer stops.
func (sw *statusWriter) writeUntilDone(s Status) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := sw.repo.Add(ctx, sw.key, s.Record(), nameresolve.AddOptions{TTL: sw.ttl, Replace: true})
		cancel()
		if err == nil {
			if attempt > 0 {
				sw.log.Info("status record written after retries", "attempts", attempt+1)
			}
			return
		}
		if attempt == 0 {
			sw.log.Warn("status record not written; retrying", "err", err)
		}
		select {
		case <-sw.stop:
			return
		case newer := <-sw.pending:
			s = newer
		case <-time.After(time.Second):
		}
	}
}

// close stops the writer and stores final with no lease: the record stays
// after the worker has gone, until the trial is cleared.
func (sw *statusWriter) close(final Status) {
	close(sw.stop)
	<-sw.done
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := sw.repo.Add(ctx, sw.key, final.Record(), nameresolve.AddOptions{Replace: true}); err != nil {
		sw.log.Warn("final status record not written", "err", err)
	}
}
