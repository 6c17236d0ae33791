#!/usr/bin/env bash
# Fails if a tracked file is over 1 MB or is an executable binary: build
# outputs belong in bin/ or .local/, which are ignored, never in a commit.
# Reads what git tracks (the index: modes, sizes and contents), not the work
# tree, and needs nothing but git and coreutils.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
bad=0
# mode object stage<TAB>path, then the object's size from one cat-file.
while IFS=$'\t' read -r meta path; do
  read -r mode object size <<<"$meta"
  if ((size > limit)); then
    echo "tracked file over 1 MB: $path ($size bytes)"
    bad=1
  fi
  # Process substitution: cat-file may die of SIGPIPE once head has its 4
  # bytes, which must not fail the script under pipefail.
  magic=$(head -c 4 < <(git cat-file blob "$object") | od -An -tx1 | tr -d ' \n')
  if [[ $mode == 100755 && $magic != 2321* ]]; then # 2321 is "#!"
    echo "tracked executable that is not a script: $path"
    bad=1
  elif [[ $magic == 7f454c46 ]]; then # ELF
    echo "tracked ELF binary: $path"
    bad=1
  fi
done < <(git ls-files -s | while IFS=$'\t' read -r info path; do
  read -r mode object _ <<<"$info"
  printf '%s %s %s\t%s\n' "$mode" "$object" "$(git cat-file -s "$object")" "$path"
done)
if ((bad)); then
  echo "remove these files from git (git rm --cached) and keep build outputs under bin/ or .local/"
  exit 1
fi
