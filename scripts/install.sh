#!/bin/sh
# Installs thindist and what it needs on Debian (bookworm or later), then
# links the bundled example through it. Run from the repository root.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib/apt.sh"
. "$root/scripts/lib/build.sh"

# What thindist and the demo need: clang, lld and llvm-ar of LLVM 22, and make;
# the worker (worker/) builds against LLVM 22's clang libraries.
need_packages clang-22 lld-22 llvm-22 make libclang-cpp22-dev libclang-22-dev llvm-22-dev

cd "$root"
bindir=$(go env GOBIN)
[ -n "$bindir" ] || bindir="$(go env GOPATH)/bin"
build_thindist "$bindir/thindist"
echo "installed $bindir/thindist and $bindir/thindist-link"
# thindist runs the thindist-worker it finds beside itself (docs/worker.md).
make -s -C worker
install -m 755 worker/thindist-worker "$bindir/thindist-worker"
echo "installed $bindir/thindist-worker"

# The demo: compile with -flto=thin, link with thindist as the distributor.
# Its workers live for the link only (THINDIST_WORKER_IDLE=0): an install
# leaves no server running; the user's first link starts one.
demo=$(mktemp -d)
trap 'rm -rf "$demo"' EXIT
cp examples/hello/*.c examples/hello/Makefile "$demo/"
THINDIST_WORKER_IDLE=0 make -s -C "$demo" THINDIST="$bindir/thindist" hello
"$demo/hello"
