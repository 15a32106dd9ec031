#!/usr/bin/env bash
# Run every Go fuzz target of the module for FUZZTIME each (default 30s),
# one after the other (go test -fuzz takes one target at a time), and print
# a table of executions per target. Failing inputs land in the package's
# testdata/fuzz/ and then run as regression tests with every `go test`.
#   scripts/fuzz.sh [PACKAGE_PATTERN]      FUZZTIME=2m scripts/fuzz.sh ./rpc
#
# FUZZMINIMIZETIME (default 5s) bounds the engine's minimizing of each new
# interesting input. Go's default (60s) is spent inside FUZZTIME, with no
# executions counted meanwhile: its minimizer tries removing every range
# of bytes, quadratic in the input's length, so an input grown from a
# kilobyte seed (experiment.FuzzParse's built-in YAML files) keeps a worker
# busy for the whole minute, which looked like an input that hangs.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
pattern=${1:-./...}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
failed=0
printf '%-60s %12s %s\n' TARGET EXECS RESULT
for pkg in $($GO list "$pattern"); do
  targets=$($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    out="$log/$(echo "$pkg.$t" | tr '/' '_')"
    if $GO test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$out" 2>&1; then
      result=ok
    elif grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input' "$out"; then
      # The engine's own deadline hit an input still running (or being
      # minimized) when FUZZTIME ran out: no failing input, nothing found.
      result="ok (an input was still running at the deadline)"
    else
      result="FAILED (see below)"
      failed=1
    fi
    # The last progress line: "fuzz: elapsed: 30s, execs: 123456 (4115/sec), ...".
    # Executions that stop rising (0/sec) for longer than FUZZMINIMIZETIME
    # mean one input runs that long: the table shows the count, the log the stall.
    execs=$(grep -o 'execs: [0-9]*' "$out" | tail -1 | cut -d' ' -f2)
    printf '%-60s %12s %s\n' "${pkg#github.com/distrl/distrl/}.$t" "${execs:-?}" "$result"
    if [ "${result%% *}" != ok ]; then
      tail -30 "$out"
    fi
  done
done
exit $failed
