package paramstream

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/distrl/distrl/internal/endpoint"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Defaults of the options.
const (
	DefaultPolicy = "default"
	DefaultHost   = endpoint.DefaultHost
	DefaultTTL    = endpoint.DefaultTTL

	// maxRequestSize caps what the publisher's ROUTER accepts: requests
	// are a few dozen bytes, and ZMQ drops a peer that sends more before
	// allocating it.
	maxRequestSize = 64 << 10
	// replyHWM is how many replies may queue for one subscriber. Replies
	// can be large; a peer that asks without reading must not make the
	// publisher buffer copy after copy.
	replyHWM = 4
	// closeTimeout bounds how long Close waits for name resolve.
	closeTimeout = 3 * time.Second
)

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	Repo   nameresolve.Repository
	Trial  names.Trial
	Policy string // default "default"
	Host   string // bind and advertise; "" = 127.0.0.1
	// TTL is the lease of the record: how long it outlives a trainer that
	// died without closing. Default 10 s.
	TTL    time.Duration
	Logger *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// PublisherStats are a publisher's counters since it was created.
type PublisherStats struct {
	Version   int64 // newest published, -1 before the first Publish
	Published int64 // Publish calls that succeeded (at least locally)
	Requests  int64 // well-formed fetch requests
	Served    int64 // replies that carried parameters
	Refused   int64 // error replies (no such version, unknown policy)
	Malformed int64 // requests dropped as malformed
	// Undeliverable counts replies dropped because their subscriber was
	// gone or had replyHWM replies unread.
	Undeliverable int64
	BytesServed   int64 // bytes of replies that carried parameters
}

// Publisher serves one policy's newest parameters: it notifies
// subscribers of each version on a PUB socket, answers fetches on a
// ROUTER socket and keeps the policy's record in name resolve. It is for
// one goroutine, the trainer's loop, which calls Poll (or waits on Socket)
// between its own work.
type Publisher struct {
	opts   PublisherOptions
	log    *slog.Logger
	key    string
	epoch  uint64
	router *zmq.Socket
	pub    *zmq.Socket
	fetch  string // "host:port" of router
	notify string // "host:port" of pub
	dec    *decoder

	// reply is the encoded reply for the newest version, in buf. Encoding
	// once per Publish, not once per fetch, keeps a fetch a single copy
	// into ZMQ. buf is reused from version to version: ZMQ copies what it
	// sends before SendBytes returns, so nothing else refers to it, and a
	// trainer publishing a large vector does not allocate a new one each
	// time.
	buf     bytes.Buffer
	reply   []byte
	version int64

	malLog zsock.RateLog
	stats  PublisherStats
	closed bool
}

// NewPublisher binds the fetch (ROUTER) and notify (PUB) sockets on free
// ports of opts.Host. The record is written by the first Publish: until
// then there is nothing to fetch. ctx is accepted for symmetry with the
// other constructors; binding does not block.
func NewPublisher(ctx context.Context, opts PublisherOptions) (*Publisher, error) {
	opts.Policy = cmp.Or(opts.Policy, DefaultPolicy)
	if err := endpoint.Prepare("paramstream: PublisherOptions", opts.Repo, &opts.Host, &opts.TTL, nil); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("paramstream: new publisher: %w", err)
	}
	p := &Publisher{
		opts: opts,
		log:  zsock.LoggerOr(opts.Logger).With("policy", opts.Policy),
		key:  opts.Trial.Params(opts.Policy),
		// Random, so a restarted trainer is a new epoch even if it comes
		// back at the same address; 53 bits keep it exact in any JSON
		// reader that parses numbers as doubles.
		epoch:   rand.Uint64() >> 11,
		dec:     newDecoder(),
		version: -1,
	}
	if err := p.setup(); err != nil {
		p.closeSockets()
		return nil, fmt.Errorf("paramstream: publisher for policy %q: %w", opts.Policy, err)
	}
	p.stats.Version = -1
	p.log.Info("paramstream: publisher ready", "fetch", p.fetch, "notify", p.notify, "key", p.key)
	return p, nil
}

func (p *Publisher) setup() error {
	// LINGER 0 on both: what is queued for subscribers must not hold up
	// Close; they fetch again from whoever publishes next.
	var err error
	// SNDHWM: replyHWM. MANDATORY: a reply to a subscriber that is gone or
	// not reading fails at once instead of vanishing silently, so it can
	// be counted.
	p.router, p.fetch, err = zsock.Bind(zmq.ROUTER, p.opts.Host, zsock.Options{
		MaxMsgSize: maxRequestSize, SendHWM: replyHWM, RouterMandatory: true, Curve: p.opts.Curve.SocketKeys(),
	})
	if err != nil {
		return err
	}
	// Subscribers send a PUB socket nothing but subscriptions, which are
	// as small as requests.
	p.pub, p.notify, err = zsock.Bind(zmq.PUB, p.opts.Host, zsock.Options{MaxMsgSize: maxRequestSize, Curve: p.opts.Curve.SocketKeys()})
	return err
}

// FetchAddr is the "host:port" subscribers fetch from.
func (p *Publisher) FetchAddr() string { return p.fetch }

// NotifyAddr is the "host:port" subscribers receive notifications from.
func (p *Publisher) NotifyAddr() string { return p.notify }

// Epoch identifies this publisher among restarts of the trainer.
func (p *Publisher) Epoch() uint64 { return p.epoch }

// Version is the newest published version, -1 before the first Publish.
func (p *Publisher) Version() int64 { return p.version }

// Socket is the fetch (ROUTER) socket, for the owner's idle wait: it is
// readable when a fetch request is waiting for Poll.
func (p *Publisher) Socket() *zmq.Socket { return p.router }

// Stats returns the counters.
func (p *Publisher) Stats() PublisherStats { return p.stats }

// Publish makes data (copied) the newest parameters at version: fetches
// from then on get it, subscribers are notified, and the record is
// rewritten to name it. version must be greater than the last one
// published (ErrStaleVersion otherwise).
//
// The name-resolve write is the only step that can block; ctx bounds it.
// If it fails, the error is returned, but the version is published all
// the same: connected subscribers are notified and can fetch it, and the
// next Publish writes the record again.
func (p *Publisher) Publish(ctx context.Context, version int64, data []float32) error {
	if p.closed {
		return ErrClosed
	}
	if version < 0 || version <= p.version {
		return fmt.Errorf("%w: version %d, last published %d", ErrStaleVersion, version, p.version)
	}
	reply, err := encodeParamsReply(&p.buf, p.opts.Policy, version, p.epoch, data)
	if err != nil {
		// The buffer held the previous version's reply: serve nothing
		// until the next Publish rather than a half-written reply.
		p.reply = nil
		return fmt.Errorf("paramstream: publish version %d: %w", version, err)
	}
	p.reply, p.version = reply, version
	p.stats.Published++
	p.stats.Version = version
	p.notifySubscribers()
	rec := Record{Version: version, Fetch: p.fetch, Notify: p.notify, Epoch: p.epoch}
	// Leased: the record goes within TTL of the trainer's death, and with
	// it the subscribers' attempts to fetch from a dead address; they keep
	// their last parameters. Not DeleteOnExit: the lease's revocation on
	// the repository's Close removes it anyway, and Close below removes it
	// at once.
	err = p.opts.Repo.Add(ctx, p.key, rec.encode(), nameresolve.AddOptions{TTL: p.opts.TTL, Replace: true})
	if err != nil {
		return fmt.Errorf("paramstream: publish version %d: write record: %w", version, err)
	}
	return nil
}

// notifySubscribers sends {policy, version, epoch} on the PUB socket. PUB
// never blocks: a subscriber too slow to take it loses the notification
// and learns of the version from the record instead.
func (p *Publisher) notifySubscribers() {
	msg, err := encode(notification{Policy: p.opts.Policy, Version: p.version, Epoch: p.epoch})
	if err == nil {
		_, err = p.pub.SendBytes(msg, zmq.DONTWAIT)
	}
	if err != nil && !zsock.IsEAGAIN(err) {
		p.log.Warn("paramstream: notification not sent", "version", p.version, "err", err)
	}
}

// Poll answers up to max fetch requests that have arrived, without
// blocking, and returns how many messages it took. Malformed requests are
// counted and dropped; an error means the socket failed.
func (p *Publisher) Poll(max int) (int, error) {
	if p.closed {
		return 0, ErrClosed
	}
	n := 0
	for ; n < max; n++ {
		parts, err := p.router.RecvMessageBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("paramstream: receive fetch request: %w", err)
		}
		if err := p.answer(parts); err != nil {
			return n + 1, err
		}
	}
	return n, nil
}

// answer handles one request. parts are the ROUTER's frames: the identity,
// then the payload (a DEALER) or an empty delimiter and the payload (a
// REQ, as a Python client might use); the reply goes back in the same
// envelope.
func (p *Publisher) answer(parts [][]byte) error {
	var envelope [][]byte
	var payload []byte
	switch {
	case len(parts) == 2:
		envelope, payload = parts[:1], parts[1]
	case len(parts) == 3 && len(parts[1]) == 0:
		envelope, payload = parts[:2], parts[2]
	default:
		p.malformed(fmt.Errorf("%d frames, want 1 (or a REQ envelope)", len(parts)-1))
		return nil
	}
	req, err := p.dec.request(payload)
	if err != nil {
		p.malformed(err)
		return nil
	}
	p.stats.Requests++
	var reply []byte
	served := false
	switch {
	case req.Policy != p.opts.Policy:
		reply, err = p.errorReply(CodeUnknownPolicy, fmt.Sprintf("this publisher serves policy %q, not %q", p.opts.Policy, req.Policy))
	case p.reply == nil || p.version < req.MinVersion:
		reply, err = p.errorReply(CodeNoParams, fmt.Sprintf("version %d asked for, newest is %d", req.MinVersion, p.version))
	default:
		reply, served = p.reply, true
	}
	if err != nil {
		return fmt.Errorf("paramstream: encode reply: %w", err)
	}
	delivered, err := p.send(envelope, reply)
	if err != nil || !delivered {
		return err
	}
	if served {
		p.stats.Served++
		p.stats.BytesServed += int64(len(reply))
	} else {
		p.stats.Refused++
	}
	return nil
}

func (p *Publisher) errorReply(code, msg string) ([]byte, error) {
	return encode(fetchReply{Policy: p.opts.Policy, Version: p.version, Epoch: p.epoch, Error: code, Message: msg})
}

// send sends a reply without blocking. A subscriber that is gone or not
// reading is counted, not an error (delivered is false): it times out and
// asks again.
func (p *Publisher) send(envelope [][]byte, reply []byte) (delivered bool, err error) {
	for _, f := range envelope {
		if _, err := p.router.SendBytes(f, zmq.SNDMORE|zmq.DONTWAIT); err != nil {
			return false, p.sendFailed(err)
		}
	}
	if _, err := p.router.SendBytes(reply, zmq.DONTWAIT); err != nil {
		return false, p.sendFailed(err)
	}
	return true, nil
}

func (p *Publisher) sendFailed(err error) error {
	if zsock.Undeliverable(err) {
		p.stats.Undeliverable++
		return nil
	}
	return fmt.Errorf("paramstream: send fetch reply: %w", err)
}

func (p *Publisher) malformed(err error) {
	p.stats.Malformed++
	p.malLog.Warn(p.log, "paramstream: malformed fetch request dropped", "err", err)
}

// Close removes the record, if it still names this publisher (a trainer
// restarted elsewhere may have replaced it already), and closes the
// sockets. Subscribers keep the parameters they have. Close is
// idempotent.
func (p *Publisher) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.version >= 0 {
		errs = append(errs, p.removeRecord())
	}
	errs = append(errs, p.closeSockets())
	return errors.Join(errs...)
}

// removeRecord deletes the record if it still has this publisher's epoch.
// The check and the delete are two calls, so a replacement written
// between them would be deleted; its next Publish writes it again.
func (p *Publisher) removeRecord() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	v, err := p.opts.Repo.Get(ctx, p.key)
	if err == nil {
		if rec, perr := ParseRecord(v); perr == nil && rec.Epoch != p.epoch {
			return nil // someone else's now
		}
		err = p.opts.Repo.Delete(ctx, p.key)
	}
	if err == nil || errors.Is(err, nameresolve.ErrNotFound) || errors.Is(err, nameresolve.ErrClosed) {
		// Gone already, or the repository closed, which revoked the lease.
		return nil
	}
	return fmt.Errorf("paramstream: remove record %q: %w", p.key, err)
}

func (p *Publisher) closeSockets() error {
	return closeSockets(p.router, p.pub)
}

// closeSockets closes the sockets that are not nil.
func closeSockets(socks ...*zmq.Socket) error {
	var errs []error
	for _, s := range socks {
		if s != nil {
			if err := s.Close(); err != nil {
				errs = append(errs, fmt.Errorf("paramstream: close socket: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}
