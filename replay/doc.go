// Package replay holds experience-replay tables: pure data structures, no
// sockets (the replayworker serves them over the data plane).
//
// A Table stores up to MaxSize items (opaque bytes with a priority and an
// id the table assigns). Its sampler picks items to sample: Uniform,
// Prioritized (P(i) = p_i^alpha / sum_j p_j^alpha on a SumTree, O(log n)
// per insert, update and draw) or FIFO (the oldest). Its remover picks
// the item a full table evicts for a new one: RemoveFIFO (the oldest) or
// RemoveLowestPriority (on a MinTree). Sample(n) draws n items with
// replacement and returns each with the probability its draw had and its
// importance weight
//
//	w_i = (N * P(i))^-beta / max_j (N * P(j))^-beta = (min_j P(j) / P(i))^beta
//
// (max over every item the table could draw, so weights lie in (0, 1]).
// UpdatePriorities sets new priorities (the learner's |TD error|): ids
// no longer in the table are ignored and counted; a NaN, infinite or
// negative priority refuses the whole call and leaves the table as it was.
//
// A Limiter paces inserts against samples (min size; samples per insert
// within an error buffer). The blocking Insert and Sample wait on a
// context; TryInsert and TrySample never wait, for loops that must not
// block (a worker's poll loop). A call held back fails with a
// *RateLimitError naming the blocked side and what it was starved of.
//
// A table's State (options, counters, items in insertion order) is its
// checkpoint, written atomically by WriteCheckpoint in the format of
// internal/ckptfile; LoadNewestCheckpoint skips a corrupt newest file for
// the one before.
package replay
