#!/bin/sh
# Runs thindist's whole test suite: unit tests, end-to-end links with Debian's
# clang/lld 22 and 19, a real project (lua5.4 from Debian's sources) and the
# remote-execution tests against the in-repo REAPI test server.
# Needs what scripts/install.sh installs, plus clang-19/lld-19 and the Debian
# source of lua5.4 (fetched here if missing).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export THINDIST_DEBSRC="${THINDIST_DEBSRC:-/var/cache/thindist-debsrc}"
if [ -x scripts/debsrc.sh ] && [ ! -d "$THINDIST_DEBSRC/lua5.4" ]; then
  scripts/debsrc.sh lua5.4 "$THINDIST_DEBSRC/lua5.4" || echo "warning: could not fetch the lua5.4 source" >&2
fi
unformatted=$(git ls-files '*.go' | xargs gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
go test -timeout 25m ./...
