// Package replayworker is the replay worker type: one or more
// replay.Tables served over the data plane (replaystream.Server, a ROUTER
// registered in name resolve as stream/replay/{name}/{index}).
//
// Clients (actors inserting, trainers sampling and updating priorities)
// hold a replaystream.Client and pipeline their requests. The loop never
// blocks: a request the rate limiter holds back (an insert past the
// samples-per-insert ratio, a sample before min size) is parked and tried
// again on later polls until its timeout_ms, then answered with a
// rate_limited error naming the starved side. Priority updates with
// unknown ids are counted; NaN or negative priorities and malformed
// frames are refused, counted, and leave the tables as they were.
//
// Several replay workers shard one replay stream: clients deal inserts
// round-robin over them, a trainer samples each, and item ids carry their
// shard (replaystream.ShardOf) so priority updates reach the right one. A
// worker started afresh takes ids from a new epoch, so ids a learner still
// holds never name new items; one restarted with checkpoint_dir resumes
// its tables from their newest valid checkpoints. Periodic checkpoints are
// written in the background from a snapshot, so serving goes on while a
// table of hundreds of MB reaches the disk.
package replayworker
