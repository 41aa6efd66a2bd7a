#!/bin/sh
# Runs thindist's whole test suite: the fast tier (go test -short), the same
# under the race detector, then the full tier: unit tests, end-to-end links
# with Debian's clang/lld 22 and 19, real projects (lua5.4 and 7-Zip from
# Debian's sources), the remote-execution tests against the in-repo REAPI
# test server, and a few Linux kernel modules built by Kbuild and linked
# through thindist link (docs/testing.md).
# Installs what its tests need when missing (Debian packages, the Debian
# sources of lua5.4 and p7zip), so that on a fresh machine it is the whole set-up.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. "$root/scripts/lib/apt.sh"

# thindist's own (as scripts/install.sh), LLVM 19 for the older-LLVM tests,
# the build systems the end-to-end tests drive (make, CMake with both of its
# generators, Meson), dpkg-dev for Debian sources, iproute2 and util-linux for
# the network and namespace tests, BuildStream's CAS server as a second REAPI
# implementation, Chromium for the HTML report's rendering test, and the
# kernel's source and build tools for the kernel modules' check.
need_packages clang-22 lld-22 llvm-22 make libclang-cpp22-dev libclang-22-dev llvm-22-dev \
	clang-19 lld-19 llvm-19 \
	cmake ninja-build meson dpkg-dev iproute2 util-linux \
	python3-buildstream chromium \
	linux-source-6.12 xz-utils flex bison bc libelf-dev
export THINDIST_DEBSRC="${THINDIST_DEBSRC:-/var/cache/thindist-debsrc}"
# The real-project tests need the Debian sources of lua5.4 and of p7zip
# (7-Zip) (idempotent; under CI a failure here fails those tests instead of
# skipping them).
scripts/debsrc.sh lua5.4 "$THINDIST_DEBSRC" || echo "warning: could not fetch the lua5.4 source" >&2
scripts/debsrc.sh p7zip "$THINDIST_DEBSRC" || echo "warning: could not fetch the p7zip source" >&2
unformatted=$(git ls-files '*.go' | xargs gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
# Three tiers (docs/testing.md), fast feedback first. -count=1: several
# packages build and run thindist as a program, which the test cache cannot
# see change, so never reuse cached results.
# The fast tier: the unit tests, without the real compiles and links.
go test -short -count=1 ./...
# The fast tier again under the race detector, over thindist's packages
# (executors, dispatcher, caches, the remote client, fork and worker
# servers, observers, and the test doubles they run against). Not e2e and
# cmd, which run thindist as a program built without it, nor bench, the
# benchmark program (its usage test bounds this process's memory, which
# the race detector grows).
go test -race -short -count=1 -timeout 30m ./internal/...
# The full tier. The timeout is per package: e2e, the longest, takes
# minutes on an idle machine and far longer on a loaded one, where a tight
# bound would report a hang.
go test -count=1 -timeout 45m ./...
# A few kernel modules built with Kbuild, their ld.lld -r links through
# thindist link, checked against lld's in-process links (a few minutes; the
# whole kernel, booted under qemu, is scripts/kernel-test.sh without
# --modules-only, run by hand).
sh scripts/kernel-test.sh --modules-only "${THINDIST_KERNEL_MODULES_SCRATCH:-/var/tmp/thindist-kernel-modules}"
