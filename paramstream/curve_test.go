package paramstream_test

import (
	"testing"

	"github.com/distrl/distrl/internal/testsupport/curvetest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/paramstream"
	zmq "github.com/pebbe/zmq4"
)

// With the trial's keys, the publisher refuses fetches from peers without
// them (no reply, no parameters read) and its notifications reach only
// subscribers with them; a subscriber with the keys follows as usual.
func TestPublisherCurve(t *testing.T) {
	keys := curvetest.Keys(t)
	repo := workertest.Repo(t)
	l := startPublisher(t, repo, func(o *paramstream.PublisherOptions) { o.Curve = keys })
	var mon *curvetest.Monitor
	var fetch, notify string
	l.do(t, func(p *paramstream.Publisher) {
		mon = curvetest.Watch(t, p.Socket())
		fetch, notify = p.FetchAddr(), p.NotifyAddr()
	})
	l.publish(t, 1, paramsFor(1, 16))
	req := mustMarshal(t, map[string]any{"policy": "default", "min_version": 0})
	fetchers := map[string]*zmq.Socket{
		"a fetcher without CURVE":     curvetest.Raw(t, zmq.DEALER, fetch, nil),
		"a fetcher with another pair": curvetest.Raw(t, zmq.DEALER, fetch, curvetest.Keys(t)),
	}
	for _, s := range fetchers {
		if _, err := s.SendBytes(req, zmq.DONTWAIT); err != nil {
			t.Fatal(err)
		}
	}
	listeners := map[string]*zmq.Socket{
		"a listener without CURVE":     curvetest.Raw(t, zmq.SUB, notify, nil),
		"a listener with another pair": curvetest.Raw(t, zmq.SUB, notify, curvetest.Keys(t)),
	}
	mon.WaitRefused(t, len(fetchers))

	sub := newSubscriber(t, repo, func(o *paramstream.SubscriberOptions) { o.Curve = keys })
	f := newFollower(sub, 16)
	f.mustUntil(t, 1)
	l.publish(t, 2, paramsFor(2, 16))
	f.mustUntil(t, 2) // notified of 2: the outsiders were sent it too, if they could be
	if st, fetched := l.stats(t), sub.Stats().NetworkFetches; st.Served != fetched || st.Malformed != 0 {
		t.Errorf("publisher served %d, the keyed subscriber fetched %d (stats %+v): want only its fetches", st.Served, fetched, st)
	}
	for who, s := range fetchers {
		curvetest.NothingReceived(t, s, who)
	}
	for who, s := range listeners {
		curvetest.NothingReceived(t, s, who)
	}
}
