// Package paramstream is distrl's parameter service: the trainer
// publishes versioned parameters of a policy (one flat []float32), and
// policy workers (later inline actors) follow the newest version.
//
// # Push and pull
//
// A Publisher (trainer side) binds two sockets and names them in the
// policy's record, trial.Params(policy):
//
//	{"version": 12, "fetch": "host:port", "notify": "host:port", "epoch": 81985529216486895}
//
// Each Publish sends a notification on the PUB socket (push) and rewrites
// the record; the parameters themselves are fetched on demand from the
// ROUTER socket (pull). Notifications are hints: one that is lost (PUB
// drops messages for slow or not yet connected subscribers) costs nothing,
// because the record says the same a moment later. A Subscriber watches
// the record, so it follows a publisher that restarts elsewhere, and a
// late joiner or a restarted policy worker reads the newest version from
// it and fetches at once (Fetch).
//
// # One fetch per node
//
// Parameter vectors are large and every policy worker wants each version,
// so subscribers on one machine share a node cache directory
// (DefaultCacheDir: under $XDG_RUNTIME_DIR, usually a tmpfs, one directory
// per node name, $SLURMD_NODENAME in a SLURM job) instead of
// each pulling over the network. No daemon is involved; the kernel
// coordinates:
//
//   - A subscriber that needs version V first looks for a file of V or
//     newer in the directory and reads it if there is one.
//   - Otherwise it tries to take the directory's fetch lock (flock, never
//     blocking). The one that gets it looks once more, then fetches over
//     the network, writes v{V}-{epoch}.params atomically (temporary file,
//     fsync, rename), prunes old files and releases the lock. Since the
//     publisher always answers with its newest version, one fetch serves
//     every version announced meanwhile.
//   - The others carry on with the parameters they have and look for the
//     file again every couple of milliseconds; when it lands they read it
//     with no network traffic.
//
// A lock holder that dies releases the lock with its file descriptor. One
// that stops polling (a paused worker) is bypassed after two fetch
// timeouts: single flight is an optimisation, never needed for
// correctness. There is one lock per directory rather than per version so
// that two processes cannot fetch the newest version at once because they
// learnt of different versions first.
//
// A cache file is a 40-byte header (magic, version, epoch, count, CRC-32C
// of the data, CRC-32C of the header) followed by the values as
// little-endian float32. A file that is short, damaged or not what its
// name says is removed and fetched again; files of other epochs and all
// but the newest two versions are pruned. A cache that cannot be used
// (permissions, a full disk) degrades to one network fetch per subscriber,
// with a warning in the log.
//
// # Versions and epochs
//
// Versions grow within one Publisher (Publish refuses an older one). Each
// Publisher has a random epoch; when the record names a new epoch (a
// trainer restarted, perhaps from a checkpoint of an older version),
// subscribers take its newest version even if the number is lower,
// because it is now the truth. Cache files carry the epoch, so a
// restarted trainer's version 7 is never mistaken for its predecessor's.
//
// The record is on a lease of the publisher's TTL, kept alive while the
// trainer lives. When the trainer dies the record expires, and when it
// closes the Publisher removes it (unless another publisher has replaced
// it); either way subscribers keep the parameters they have and follow
// the next record that appears.
//
// # Threading and blocking
//
// ZMQ sockets belong to one goroutine, and so do Publisher and Subscriber;
// only the Subscriber's record watch runs on a goroutine of its own, and it
// just hands the newest record over. Publisher.Poll and Subscriber.Poll
// never block: a subscriber's network fetch spans several Polls (send the
// request, later take the reply), so a policy worker keeps serving with
// the parameters it has while a new version is on its way, and a trainer
// busy with a long update delays nothing but the new version. The owner
// waits on Socket / Sockets together with its own sockets when idle.
// Subscriber.Fetch blocks, bounded by its ctx, and is meant for start-up.
// The publisher answers fetches only when its owner polls it, so a trainer
// should call Publisher.Poll between training steps (or wait on its Socket
// when idle).
//
// # Wire format
//
// One msgpack map per frame; the data is an api.Tensor ({dtype, shape,
// data: bin}, little-endian), so a Python peer needs only pyzmq, msgpack
// and numpy:
//
//	notification (PUB -> SUB):       {"policy": str, "version": int, "epoch": uint}
//	fetch request (DEALER -> ROUTER): {"policy": str, "min_version": int}
//	fetch reply (ROUTER -> DEALER):   {"policy", "version", "epoch", "data": float32 [n]}
//	                                 or {"policy", "version", "epoch", "error": code, "message": str}
//
// The publisher answers with its newest version, or with the error
// "no_params" if that is older than min_version, or "unknown_policy". A
// REQ socket may send requests too (the reply keeps its envelope).
// Malformed messages are counted and dropped on both sides; neither side
// dies of a message, and ZMQ's MAXMSGSIZE bounds what a peer can make
// either side allocate.
package paramstream
