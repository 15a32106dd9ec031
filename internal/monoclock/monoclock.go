package monoclock

import "time"

// start carries the monotonic reading every Now counts from.
var start = time.Now()

// Now is the current time, from one read of the monotonic clock.
func Now() time.Time { return start.Add(time.Since(start)) }
