package stream

// requests holds an inference client's requests by id, from Post until
// Consume. Ids are handed out in sequence, so the live ones are a window
// of consecutive ids with holes where requests were consumed: a slice
// indexed by id − first, trimmed at the front as the oldest go, finds a
// request with a subtraction where a map hashed (the map's inserts,
// lookups and deletes were a tenth of the client's CPU time in a round
// trip of 512 rows). A request left unconsumed would pin the window's
// front and let it grow with every later id; once the window is mostly
// holes, the oldest live requests move to a map of their own instead.
type requests struct {
	first ReqID     // id of win[0]
	win   []request // buf[lo:]; state 0: consumed
	buf   []request
	lo    int
	live  int // requests in win
	old   map[ReqID]*request
}

// add records the request of id, which must be newer than every id added
// before.
func (q *requests) add(id ReqID, r request) {
	if len(q.win) == 0 {
		q.first = id
	}
	for ReqID(len(q.win)) < id-q.first { // ids skipped: holes
		q.push(request{})
	}
	q.push(r)
	q.live++
	if len(q.win) > 1024 && len(q.win) > 8*q.live {
		q.evictOldest()
	}
}

// at is the request of id, to read or change in place; nil when there is
// none (never added, or consumed). It stays valid until the next add or
// remove. In place: a request is about 80 bytes, and copying it out and
// back for each reply row was a tenth of a round trip's client time.
func (q *requests) at(id ReqID) *request {
	if i := id - q.first; id >= q.first && i < ReqID(len(q.win)) {
		if r := &q.win[i]; r.state != 0 {
			return r
		}
		return nil
	}
	return q.old[id]
}

// settled reports whether the request of id has an outcome for Consume.
func (q *requests) settled(id ReqID) bool {
	r := q.at(id)
	return r != nil && r.state.settled()
}

// remove forgets the request of id.
func (q *requests) remove(id ReqID) {
	if i := id - q.first; id >= q.first && i < ReqID(len(q.win)) {
		if q.win[i].state == 0 {
			return
		}
		q.win[i] = request{}
		q.live--
		q.trim()
		return
	}
	delete(q.old, id)
}

// push appends r to the window. When the array is full and more than half
// of it is behind the window, the window slides to its front instead of
// growing it: each slide moves at most as many entries as were trimmed
// since the last, so it costs O(1) per request.
func (q *requests) push(r request) {
	if len(q.buf) == cap(q.buf) && q.lo > len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.lo:])
		clear(q.buf[n:])
		q.buf, q.lo = q.buf[:n], 0
	}
	q.buf = append(q.buf, r)
	q.win = q.buf[q.lo:]
}

// trim drops the holes at the window's front.
func (q *requests) trim() {
	n := 0
	for n < len(q.win) && q.win[n].state == 0 {
		n++
	}
	if n == 0 {
		return
	}
	if n == len(q.win) { // empty (every entry is zero already): the next add sets first
		q.buf, q.lo, q.win = q.buf[:0], 0, q.buf[:0]
		return
	}
	q.lo += n
	q.win = q.buf[q.lo:]
	q.first += ReqID(n)
}

// evictOldest moves the live requests of the window's older half to old.
func (q *requests) evictOldest() {
	half := len(q.win) / 2
	if q.old == nil {
		q.old = map[ReqID]*request{}
	}
	for i, r := range q.win[:half] {
		if r.state != 0 {
			q.old[q.first+ReqID(i)] = &r
			q.win[i] = request{}
			q.live--
		}
	}
	q.trim()
}

// len is the number of requests held.
func (q *requests) len() int { return q.live + len(q.old) }
