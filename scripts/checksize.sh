#!/usr/bin/env bash
# Refuse tracked files larger than a limit (default 1 MB): build outputs and
# data dumps belong in .gitignore, not in the history every clone downloads.
set -euo pipefail
limit=${1:-1000000}
cd "$(git rev-parse --show-toplevel)"
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ]; then
    echo "tracked file over $limit bytes: $f ($size bytes)" >&2
    bad=1
  fi
done < <(git ls-files -z)
if [ "$bad" -ne 0 ]; then
  echo "remove it (git rm --cached) and ignore it in .gitignore" >&2
  exit 1
fi
