#!/usr/bin/env bash
# Fails if a tracked file is over 1 MB or is an executable binary: build
# outputs belong in bin/ or .local/, which are ignored, never in a commit.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue # deleted in the work tree, not yet committed
  size=$(stat -c %s -- "$f")
  if ((size > limit)); then
    echo "tracked file over 1 MB: $f ($size bytes)"
    bad=1
  fi
  # An executable binary: ELF (or any non-text content) with the executable
  # bit. Scripts start with #! and are fine.
  if [[ -x $f ]] && [[ "$(head -c 2 -- "$f")" != '#!' ]]; then
    echo "tracked executable that is not a script: $f"
    bad=1
  elif [[ "$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]]; then
    echo "tracked ELF binary: $f"
    bad=1
  fi
done < <(git ls-files -z)
if ((bad)); then
  echo "remove these files from git (git rm --cached) and keep build outputs under bin/ or .local/"
  exit 1
fi
