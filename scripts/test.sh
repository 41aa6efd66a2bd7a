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
# The real-project tests need lua5.4's Debian source (idempotent; under CI a
# failure here fails those tests instead of skipping them).
scripts/debsrc.sh lua5.4 "$THINDIST_DEBSRC" || echo "warning: could not fetch the lua5.4 source" >&2
unformatted=$(git ls-files '*.go' | xargs gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
# -count=1: several packages build and run thindist as a program, which the
# test cache cannot see change, so never reuse cached results.
go test -count=1 -timeout 25m ./...
