#!/bin/sh
# Installs thindist and what it needs on Debian (bookworm or later), then
# links the bundled example through it. Run from the repository root.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

if ! command -v clang-22 >/dev/null || ! command -v ld.lld-22 >/dev/null || ! command -v llvm-ar-22 >/dev/null; then
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-22 lld-22 llvm-22 make >/dev/null
fi

cd "$root"
bindir=$(go env GOBIN)
[ -n "$bindir" ] || bindir="$(go env GOPATH)/bin"
go build -o "$bindir/thindist" ./cmd/thindist
echo "installed $bindir/thindist"

# The demo: compile with -flto=thin, link with thindist as the distributor.
demo=$(mktemp -d)
trap 'rm -rf "$demo"' EXIT
cp examples/hello/*.c examples/hello/Makefile "$demo/"
make -s -C "$demo" THINDIST="$bindir/thindist" hello
"$demo/hello"
