package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/distrl/distrl/nameresolve"
)

// recordWriter stores a record (a worker's status, a loop's heartbeat) off
// the worker loop, so a slow or restarting etcd never stalls the work. Only
// the newest value matters: publishing replaces one that is still waiting.
type recordWriter struct {
	repo nameresolve.Repository
	key  string
	ttl  time.Duration
	log  *slog.Logger

	pending chan string
	stop    chan struct{}
	done    chan struct{}
}

func newRecordWriter(repo nameresolve.Repository, key string, ttl time.Duration, log *slog.Logger) *recordWriter {
	sw := &recordWriter{
		repo: repo, key: key, ttl: ttl, log: log,
		pending: make(chan string, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go sw.run()
	return sw
}

// publish queues s, replacing an older value not yet written.
func (sw *recordWriter) publish(s string) {
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

func (sw *recordWriter) run() {
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

// writeUntilDone retries s every second until it is stored, a newer value
// replaces it, or the writer stops.
func (sw *recordWriter) writeUntilDone(s string) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := sw.repo.Add(ctx, sw.key, s, nameresolve.AddOptions{TTL: sw.ttl, Replace: true})
		cancel()
		if err == nil {
			if attempt > 0 {
				sw.log.Info("record written after retries", "key", sw.key, "attempts", attempt+1)
			}
			return
		}
		if attempt == 0 {
			sw.log.Warn("record not written; retrying", "key", sw.key, "err", err)
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
func (sw *recordWriter) close(final string) {
	sw.stopWriting()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := sw.repo.Add(ctx, sw.key, final, nameresolve.AddOptions{Replace: true}); err != nil {
		sw.log.Warn("final record not written", "key", sw.key, "err", err)
	}
}

// remove stops the writer and deletes the record.
func (sw *recordWriter) remove() {
	sw.stopWriting()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := sw.repo.Delete(ctx, sw.key); err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
		sw.log.Warn("record not removed", "key", sw.key, "err", err)
	}
}

func (sw *recordWriter) stopWriting() {
	close(sw.stop)
	<-sw.done
}
