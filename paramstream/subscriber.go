package paramstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Defaults and tuning of the subscriber.
const (
	DefaultFetchTimeout = 5 * time.Second
	// DefaultMaxMsgSize is the largest fetch reply accepted: 256M float32.
	DefaultMaxMsgSize = 1 << 30

	// maxDrain bounds how many messages one Poll takes from a socket, so a
	// flood cannot keep the owner inside Poll.
	maxDrain = 256
	// lockRecheck is how often a subscriber waiting for another process's
	// fetch looks for the file again.
	lockRecheck = 2 * time.Millisecond
	// connectRetry is how soon a fetch is tried again while the connection
	// to a newly followed publisher is still being set up.
	connectRetry = 5 * time.Millisecond
	// Backoff after a failed fetch.
	minBackoff = 20 * time.Millisecond
	maxBackoff = 2 * time.Second
	// fetchWaitSlice bounds one wait of Fetch, so it sees record changes
	// and ctx promptly.
	fetchWaitSlice = 10 * time.Millisecond
	// Backoff between attempts to re-establish a broken record watch.
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// SubscriberOptions configure a Subscriber.
type SubscriberOptions struct {
	Repo   nameresolve.Repository
	Trial  names.Trial
	Policy string // default "default"
	// CacheDir is the node cache directory of this policy; "" means
	// DefaultCacheDir(Trial, Policy). Subscribers that share a directory,
	// in any number of processes, share fetches: one fetches a version
	// over the network, the others read it from the directory.
	CacheDir string
	// NoCache makes every subscriber fetch for itself and write nothing.
	NoCache bool
	// FetchTimeout bounds the wait for one fetch reply; twice it bounds
	// the wait for another process's fetch before fetching directly.
	// Default 5 s.
	FetchTimeout time.Duration
	// MaxMsgSize is the largest fetch reply accepted, in bytes; default
	// 1 GiB. ZMQ drops the connection of a peer that sends more.
	MaxMsgSize int64
	Logger     *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// Params is one version of a policy's parameters. Data belongs to the
// caller.
type Params struct {
	Policy  string
	Version int64
	Data    []float32
}

// SubscriberStats are a subscriber's counters since it was created.
type SubscriberStats struct {
	Version        int64 // version of the last Params returned, -1 if none
	Known          int64 // newest version known to be published, -1 if none
	NetworkFetches int64 // parameters received over the network
	CacheHits      int64 // parameters read from the node cache
	BytesFetched   int64 // bytes of fetch replies that carried parameters
	BytesRead      int64 // bytes read from the node cache
	CorruptFiles   int64 // cache files found corrupt, removed and fetched again
	FetchFailures  int64 // fetches that failed (timeout, unreachable, refused)
	Notifications  int64 // well-formed notifications received
	// Malformed counts notifications, replies and records dropped as
	// malformed.
	Malformed int64
	// Stale counts replies dropped because they answered an older request
	// or came from a publisher no longer followed.
	Stale int64
}

// Subscriber follows the newest parameters of one policy. Apart from the
// record watch, which runs on a goroutine of its own and only hands over
// the newest record, it is for one goroutine (a worker's loop).
type Subscriber struct {
	opts   SubscriberOptions
	log    *slog.Logger
	key    string
	sub    *zmq.Socket // notifications
	dealer *zmq.Socket // fetches
	cache  *cache      // nil: NoCache
	dec    *decoder

	records    chan *Record // newest record from the watch; nil: none
	cancel     context.CancelFunc
	done       chan struct{}
	badRecords atomic.Int64

	rec         *Record // the publisher followed; nil while there is none
	epoch       uint64  // epoch of the publisher followed last
	notifyEP    string  // endpoint the SUB socket is connected to
	fetchEP     string  // endpoint the DEALER socket is connected to
	connectedAt time.Time
	known       int64 // newest version known to exist in epoch
	delivered   int64 // newest version returned in epoch; -1 none
	pending     *pendingFetch

	retryAt       time.Time // no fetch before this
	backoff       time.Duration
	lockWaitSince time.Time // when this subscriber started waiting on the lock
	lastErr       error     // why the newest known version is not here yet

	malLog, cacheLog zsock.RateLog
	stats            SubscriberStats
	closed           bool
}

// pendingFetch is a request sent and not yet answered.
type pendingFetch struct {
	want     int64    // min_version asked for
	epoch    uint64   // publisher asked
	lock     *os.File // the node's fetch lock, if this subscriber holds it
	deadline time.Time
}

// NewSubscriber reads the policy's record once (bounded by ctx), connects
// to the publisher it names, if any, and starts following the record.
// Nothing is fetched until Poll or Fetch; the cache directory is created
// on first use.
func NewSubscriber(ctx context.Context, opts SubscriberOptions) (*Subscriber, error) {
	opts.Policy = cmp.Or(opts.Policy, DefaultPolicy)
	opts.FetchTimeout = cmp.Or(opts.FetchTimeout, DefaultFetchTimeout)
	opts.MaxMsgSize = cmp.Or(opts.MaxMsgSize, DefaultMaxMsgSize)
	opts.CacheDir = cmp.Or(opts.CacheDir, DefaultCacheDir(opts.Trial, opts.Policy))
	switch {
	case opts.Repo == nil:
		return nil, errors.New("paramstream: SubscriberOptions.Repo is required")
	case opts.FetchTimeout < 0 || opts.MaxMsgSize < 0:
		return nil, fmt.Errorf("paramstream: invalid SubscriberOptions (FetchTimeout %v, MaxMsgSize %d)",
			opts.FetchTimeout, opts.MaxMsgSize)
	}
	s := &Subscriber{
		opts:      opts,
		log:       zsock.LoggerOr(opts.Logger).With("policy", opts.Policy),
		key:       opts.Trial.Params(opts.Policy),
		dec:       newDecoder(),
		records:   make(chan *Record, 1),
		done:      make(chan struct{}),
		known:     -1,
		delivered: -1,
		backoff:   minBackoff,
		stats:     SubscriberStats{Version: -1},
	}
	if !opts.NoCache {
		s.cache = &cache{dir: opts.CacheDir}
	}
	if err := s.setup(); err != nil {
		s.closeSockets()
		return nil, fmt.Errorf("paramstream: subscriber for policy %q: %w", opts.Policy, err)
	}
	if err := s.refreshRecord(ctx); err != nil {
		s.closeSockets()
		return nil, err
	}
	// The watch outlives ctx, which bounds construction only.
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.follow(wctx)
	return s, nil
}

func (s *Subscriber) setup() error {
	// LINGER 0 on both; IPV6 on both, as records may hold IPv6 addresses.
	var err error
	// Notifications are tiny: anything larger is not one.
	if s.sub, err = zsock.New(zmq.SUB, zsock.Options{MaxMsgSize: maxRequestSize, IPv6: true, Curve: s.opts.Curve.SocketKeys()}); err != nil {
		return err
	}
	if err := s.sub.SetSubscribe(""); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	// IMMEDIATE: a request to a publisher that is not connected fails at
	// once (EAGAIN) instead of waiting in a queue for one that may be dead.
	s.dealer, err = zsock.New(zmq.DEALER, zsock.Options{MaxMsgSize: s.opts.MaxMsgSize, Immediate: true, IPv6: true, Curve: s.opts.Curve.SocketKeys()})
	return err
}

// refreshRecord reads the record and follows it.
func (s *Subscriber) refreshRecord(ctx context.Context) error {
	v, err := s.opts.Repo.Get(ctx, s.key)
	switch {
	case errors.Is(err, nameresolve.ErrNotFound):
		s.apply(nil)
	case err != nil:
		return fmt.Errorf("paramstream: read record %q: %w", s.key, err)
	default:
		rec, err := ParseRecord(v)
		if err != nil {
			s.badRecords.Add(1)
			s.log.Warn("paramstream: malformed parameter record ignored", "key", s.key, "err", err)
			return nil
		}
		s.apply(&rec)
	}
	return nil
}

// follow watches the record until ctx ends or the repository closes,
// re-establishing the watch with backoff when it breaks, and hands each
// new state of the record to the owner.
func (s *Subscriber) follow(ctx context.Context) {
	defer close(s.done)
	repo := s.opts.Repo
	backoff := watchRetryMin
	for {
		events, err := repo.Watch(ctx, s.key)
		if err == nil {
			// Read after the watch starts, so no change falls in between.
			var v string
			v, err = repo.Get(ctx, s.key)
			if err == nil || errors.Is(err, nameresolve.ErrNotFound) {
				s.handOver(v, err == nil)
				err = nil
				backoff = watchRetryMin
				for ev := range events {
					// The watch is on a prefix: "params/a" also sees "params/ab".
					if ev.Key == s.key {
						s.handOver(ev.Value, ev.Type == nameresolve.EventPut)
					}
				}
			}
		}
		if ctx.Err() != nil || errors.Is(err, nameresolve.ErrClosed) {
			return
		}
		if err != nil {
			s.log.Warn("paramstream: watching the parameter record failed; retrying", "key", s.key, "err", err, "retry_in", backoff)
		}
		// A watch that closed without an error is retried after the same
		// backoff, so a backend that keeps closing watches cannot make
		// this loop spin.
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchRetryMax)
	}
}

// handOver replaces any record the owner has not taken yet. It never
// blocks: follow is the only sender, so after the drain there is room.
func (s *Subscriber) handOver(value string, present bool) {
	var rec *Record
	if present {
		r, err := ParseRecord(value)
		if err != nil {
			// A record nobody can use changes nothing: the subscriber
			// keeps following what it had.
			s.badRecords.Add(1)
			s.log.Warn("paramstream: malformed parameter record ignored", "key", s.key, "err", err)
			return
		}
		rec = &r
	}
	select {
	case <-s.records:
	default:
	}
	s.records <- rec
}

// syncRecord applies the newest record the watch handed over, if any.
func (s *Subscriber) syncRecord() {
	select {
	case rec := <-s.records:
		s.apply(rec)
	default:
	}
}

// apply follows rec (nil: no publisher).
func (s *Subscriber) apply(rec *Record) {
	s.rec = rec
	if rec == nil {
		// The publisher is gone. What was delivered stays delivered; a
		// fetch in flight would only time out.
		s.abandon()
		s.connect(s.sub, &s.notifyEP, "")
		s.connect(s.dealer, &s.fetchEP, "")
		return
	}
	if s.connect(s.dealer, &s.fetchEP, zsock.Endpoint(rec.Fetch)) {
		s.connectedAt = time.Now()
	}
	s.connect(s.sub, &s.notifyEP, zsock.Endpoint(rec.Notify))
	if rec.Epoch != s.epoch {
		// A new publisher starts a new sequence of versions. Its newest is
		// news even if its number is lower: a trainer restarted from a
		// checkpoint counts on from there, and its parameters are the
		// ones to act with.
		if s.epoch != 0 {
			s.log.Info("paramstream: following a new publisher", "fetch", rec.Fetch, "version", rec.Version)
		}
		s.abandon()
		s.epoch, s.known, s.delivered = rec.Epoch, rec.Version, -1
		s.retryAt, s.backoff, s.lastErr = time.Time{}, minBackoff, nil
		return
	}
	s.known = max(s.known, rec.Version)
}

// connect points sock at ep ("" for nowhere) instead of *cur, and
// reports whether it changed anything.
func (s *Subscriber) connect(sock *zmq.Socket, cur *string, ep string) bool {
	if *cur == ep {
		return false
	}
	if *cur != "" {
		if err := sock.Disconnect(*cur); err != nil {
			s.log.Debug("paramstream: disconnect", "endpoint", *cur, "err", err)
		}
	}
	*cur = ""
	if ep != "" {
		if err := sock.Connect(ep); err != nil {
			// A bad record is not fatal: fetches fail and back off until a
			// good record arrives.
			s.log.Warn("paramstream: cannot connect to the publisher", "endpoint", ep, "err", err)
			return true
		}
		*cur = ep
	}
	return true
}

// abandon drops the fetch in flight, if any, releasing the lock.
func (s *Subscriber) abandon() {
	if s.pending != nil {
		unlock(s.pending.lock)
		s.pending = nil
	}
	s.lockWaitSince = time.Time{}
}

// Poll returns the newest parameters if a version newer than the last one
// returned is known and has been obtained, and nil otherwise. It never
// blocks: it takes notifications and record changes that have arrived,
// reads the node cache, and sends a fetch request or takes its reply, so
// obtaining a version over the network spans several Polls. A fetch that
// fails is retried with backoff and reported by Warning, not returned:
// the caller carries on with the parameters it has. An error means a
// socket failed or the subscriber is closed. Since Poll does not wait,
// it does not fail when ctx ends either: a worker loop that is shutting
// down may still poll once.
func (s *Subscriber) Poll(_ context.Context) (*Params, error) {
	if s.closed {
		return nil, ErrClosed
	}
	s.syncRecord()
	if err := s.drainNotifications(); err != nil {
		return nil, err
	}
	now := time.Now()
	if p, err := s.receive(now); p != nil || err != nil {
		return p, err
	}
	if s.pending != nil || s.rec == nil || s.known <= s.delivered || now.Before(s.retryAt) {
		return nil, nil
	}
	return s.start(now, s.known)
}

// Fetch obtains the newest parameters now, from the node cache or the
// network, and returns them even if Poll returned that version already;
// later Polls return only newer ones. It is meant for start-up, so that a
// late joiner or a restarted worker begins with the newest version. It
// returns ErrNoPublisher at once if there is no publisher, and otherwise
// retries until it succeeds or ctx ends; the error then wraps ctx's error
// and the last failure (ErrUnavailable, a *RemoteError).
func (s *Subscriber) Fetch(ctx context.Context) (*Params, error) {
	if s.closed {
		return nil, ErrClosed
	}
	s.syncRecord()
	if s.rec == nil {
		// The watch may not have caught up with a record written moments
		// ago; one read settles it.
		if err := s.refreshRecord(ctx); err != nil {
			return nil, err
		}
	}
	s.retryAt = time.Time{} // an explicit fetch does not sit out a backoff
	poller := zmq.NewPoller()
	poller.Add(s.dealer, zmq.POLLIN)
	for {
		if s.rec == nil {
			return nil, fmt.Errorf("paramstream: fetch %q: %w", s.opts.Policy, ErrNoPublisher)
		}
		if err := s.drainNotifications(); err != nil {
			return nil, err
		}
		now := time.Now()
		p, err := s.receive(now)
		if p == nil && err == nil && s.pending == nil && !now.Before(s.retryAt) {
			p, err = s.start(now, s.known)
		}
		if p != nil || err != nil {
			return p, err
		}
		if err := ctx.Err(); err != nil {
			// Give up the lock now rather than when a later Poll sees the
			// deadline pass; a reply that still comes is used all the same.
			s.abandon()
			if s.lastErr != nil {
				return nil, fmt.Errorf("paramstream: fetch %q version %d: %w (last failure: %w)", s.opts.Policy, s.known, err, s.lastErr)
			}
			return nil, fmt.Errorf("paramstream: fetch %q version %d: %w", s.opts.Policy, s.known, err)
		}
		wait := fetchWaitSlice
		if s.pending == nil {
			wait = min(wait, time.Until(s.retryAt))
		}
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait > 0 {
			if _, err := poller.Poll(wait); err != nil {
				return nil, fmt.Errorf("paramstream: fetch %q: wait for the reply: %w", s.opts.Policy, err)
			}
		}
		s.syncRecord()
	}
}

// drainNotifications takes the notifications that have arrived.
func (s *Subscriber) drainNotifications() error {
	for range maxDrain {
		b, err := s.sub.RecvBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("paramstream: receive notification: %w", err)
		}
		n, err := s.dec.notification(b)
		if err == nil && n.Policy != s.opts.Policy {
			err = fmt.Errorf("notification for policy %q", n.Policy)
		}
		if err != nil {
			s.malformed("notification", err)
			continue
		}
		s.stats.Notifications++
		// One from a publisher no longer followed says nothing about the
		// one followed now.
		if s.rec != nil && n.Epoch == s.epoch {
			s.known = max(s.known, n.Version)
		}
	}
	return nil
}

// start obtains want or newer: from the node cache if it is there, else
// by sending a fetch request, holding the node's fetch lock if it can be
// had. While another subscriber of the node holds the lock it returns nil
// and looks again shortly: that one's fetch will land in the cache.
func (s *Subscriber) start(now time.Time, want int64) (*Params, error) {
	var lock *os.File
	if s.cache != nil {
		if p := s.fromCache(want); p != nil {
			return p, nil
		}
		f, err := s.cache.tryLock()
		switch {
		case err == nil:
			lock = f
			s.lockWaitSince = time.Time{}
			// The holder before us may have written it since we looked.
			if p := s.fromCache(want); p != nil {
				unlock(lock)
				return p, nil
			}
		case errors.Is(err, errLocked):
			if s.lockWaitSince.IsZero() {
				s.lockWaitSince = now
			}
			if now.Sub(s.lockWaitSince) < 2*s.opts.FetchTimeout {
				s.retryAt = now.Add(lockRecheck)
				return nil, nil
			}
			// The holder has had two fetch timeouts: it is stuck (a
			// paused worker does not poll) or its fetches keep failing.
			// Fetch directly; the file is still written atomically.
			s.cacheLog.Warn(s.log, "paramstream: node fetch lock held too long; fetching directly", "dir", s.cache.dir)
		default:
			s.cacheLog.Warn(s.log, "paramstream: node cache unusable; fetching directly", "dir", s.cache.dir, "err", err)
		}
	}
	msg, err := encode(fetchRequest{Policy: s.opts.Policy, MinVersion: want})
	if err == nil {
		_, err = s.dealer.SendBytes(msg, zmq.DONTWAIT)
	}
	switch {
	case err == nil:
		s.pending = &pendingFetch{want: want, epoch: s.epoch, lock: lock, deadline: now.Add(s.opts.FetchTimeout)}
		return nil, nil
	case zsock.IsEAGAIN(err):
		unlock(lock)
		if s.fetchEP != "" && now.Sub(s.connectedAt) < s.opts.FetchTimeout {
			// The connection to a newly followed publisher is being set
			// up; that is no failure yet.
			s.retryAt = now.Add(connectRetry)
			return nil, nil
		}
		s.fail(now, fmt.Errorf("%w: not connected to %s", ErrUnavailable, s.rec.Fetch))
		return nil, nil
	default:
		unlock(lock)
		return nil, fmt.Errorf("paramstream: send fetch request: %w", err)
	}
}

// receive takes the fetch replies that have arrived. It drains the socket
// even with no fetch in flight, so that a late reply cannot leave it
// readable (and an idle owner waking up for nothing); such a reply is
// still used if it is news.
func (s *Subscriber) receive(now time.Time) (*Params, error) {
	for range maxDrain {
		b, err := s.dealer.RecvBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("paramstream: receive fetch reply: %w", err)
		}
		r, err := s.dec.reply(b)
		if err == nil && r.Policy != s.opts.Policy {
			err = fmt.Errorf("reply for policy %q", r.Policy)
		}
		if err != nil {
			s.malformed("fetch reply", err)
			continue
		}
		want := s.delivered + 1
		if s.pending != nil {
			want = s.pending.want
		}
		if r.Epoch != s.epoch || s.rec == nil {
			s.stats.Stale++
			continue
		}
		if r.Error != "" {
			if s.pending == nil {
				s.stats.Stale++
				continue
			}
			s.fail(now, &RemoteError{Code: r.Error, Message: r.Message, Version: r.Version})
			continue
		}
		if r.Version < want {
			s.stats.Stale++
			continue
		}
		s.stats.NetworkFetches++
		s.stats.BytesFetched += int64(len(b))
		var lock *os.File
		if s.pending != nil {
			lock = s.pending.lock
			s.pending.lock = nil
		}
		s.abandon()
		if s.cache != nil {
			s.store(r.Version, r.Data.Data)
		}
		// Released after the file is in place, so whoever takes the lock
		// next finds it.
		unlock(lock)
		return s.deliver(r.Version, r.Data.Data), nil
	}
	if s.pending != nil && now.After(s.pending.deadline) {
		s.fail(now, fmt.Errorf("%w: no reply from %s within %v", ErrUnavailable, s.fetchEP, s.opts.FetchTimeout))
	}
	return nil, nil
}

// fromCache reads the newest cached version >= want of the followed
// epoch, if there is one. A corrupt file is removed, so that the caller
// fetches it again.
func (s *Subscriber) fromCache(want int64) *Params {
	v, path, ok, err := s.cache.lookup(want, s.epoch)
	if err != nil {
		s.cacheLog.Warn(s.log, "paramstream: node cache unreadable", "dir", s.cache.dir, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	data, err := readFile(path, v, s.epoch)
	switch {
	case errors.Is(err, errCorrupt):
		s.stats.CorruptFiles++
		s.log.Warn("paramstream: corrupt cache file removed; fetching again", "file", path, "err", err)
		if err := s.cache.remove(path); err != nil {
			s.cacheLog.Warn(s.log, "paramstream: corrupt cache file not removed", "file", path, "err", err)
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil // pruned since the lookup: a newer one is there, or comes
	case err != nil:
		s.cacheLog.Warn(s.log, "paramstream: cache file unreadable", "file", path, "err", err)
		return nil
	}
	s.stats.CacheHits++
	s.stats.BytesRead += headerSize + 4*int64(len(data))
	return s.deliver(v, data)
}

// store writes fetched parameters to the node cache and prunes it. A
// failure costs the other processes a fetch of their own, nothing more.
func (s *Subscriber) store(version int64, data []float32) {
	if err := s.cache.write(version, s.epoch, data); err != nil {
		s.cacheLog.Warn(s.log, "paramstream: parameters not cached", "dir", s.cache.dir, "version", version, "err", err)
		return
	}
	if err := s.cache.prune(s.epoch); err != nil {
		s.cacheLog.Warn(s.log, "paramstream: pruning the node cache", "dir", s.cache.dir, "err", err)
	}
}

func (s *Subscriber) deliver(version int64, data []float32) *Params {
	s.delivered = version
	s.known = max(s.known, version)
	s.stats.Version = version
	s.retryAt, s.backoff, s.lastErr = time.Time{}, minBackoff, nil
	s.lockWaitSince = time.Time{}
	return &Params{Policy: s.opts.Policy, Version: version, Data: data}
}

// fail ends the fetch in flight, if any, and schedules the next attempt.
func (s *Subscriber) fail(now time.Time, err error) {
	s.abandon()
	s.stats.FetchFailures++
	s.lastErr = err
	s.retryAt = now.Add(s.backoff)
	s.backoff = min(2*s.backoff, maxBackoff)
	s.log.Debug("paramstream: fetch failed", "version", s.known, "err", err, "retry_in", s.retryAt.Sub(now))
}

func (s *Subscriber) malformed(what string, err error) {
	s.stats.Malformed++
	s.malLog.Warn(s.log, "paramstream: malformed "+what+" dropped", "err", err)
}

// Warning says why the newest known version has not been obtained, or ""
// if nothing is amiss.
func (s *Subscriber) Warning() string {
	if s.lastErr == nil || s.known <= s.delivered {
		return ""
	}
	return fmt.Sprintf("parameters version %d not obtained: %v", s.known, s.lastErr)
}

// Socket is the notification (SUB) socket: an idle owner waiting on it
// wakes when a new version is announced.
func (s *Subscriber) Socket() *zmq.Socket { return s.sub }

// Sockets are the notification and fetch sockets, for an idle owner to
// wait on: it then also wakes when a fetch reply arrives.
func (s *Subscriber) Sockets() []*zmq.Socket { return []*zmq.Socket{s.sub, s.dealer} }

// Stats returns the counters.
func (s *Subscriber) Stats() SubscriberStats {
	st := s.stats
	st.Known = s.known
	st.Malformed += s.badRecords.Load()
	return st
}

// Close stops following the record and closes the sockets. It is
// idempotent.
func (s *Subscriber) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.cancel()
	<-s.done
	s.abandon()
	return s.closeSockets()
}

func (s *Subscriber) closeSockets() error {
	return closeSockets(s.sub, s.dealer)
}
