#!/bin/sh
# forkcost.sh: the per-job cost of forked local backends, as CPU and page
# faults (far steadier than wall time on a shared machine), against lld's
# in-process ThinLTO, N alternating pairs, each line with the load average.
#
#   scripts/forkcost.sh kernel BUILD THINDIST [N]
#       the vmlinux.o link of a Kbuild ThinLTO tree BUILD (its own saved
#       command, from BUILD/.vmlinux.o.cmd; see scripts/kernel-test.sh),
#       in-process ld.lld against `THINDIST link --no-cache -- ld.lld ...`.
#   scripts/forkcost.sh lua OBJDIR THINDIST [N]
#       a DTLTO link of the ThinLTO objects in OBJDIR (lua 5.4's 33, say),
#       `clang -fuse-ld=lld -flto=thin` against the same with
#       -fthinlto-distributor=THINDIST --no-cache --jobs=2.
#
# Needs perf, clang-22 and ld.lld-22 (/usr/lib/llvm-22/bin is put first on
# PATH). Writes its outputs next to the inputs under names of its own.
set -eu
kind=${1:?usage: forkcost.sh kernel|lua DIR THINDIST [N]}
dir=${2:?usage: forkcost.sh kernel|lua DIR THINDIST [N]}
td=${3:?usage: forkcost.sh kernel|lua DIR THINDIST [N]}
n=${4:-3}
export PATH=/usr/lib/llvm-22/bin:$PATH
cd "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # label command...
	label=$1
	shift
	perf stat -e page-faults,task-clock -o "$tmp/perf" "$@" >/dev/null 2>&1
	tr -d , <"$tmp/perf" | awk -v l="$label" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
		/page-faults/ {pf=$1} /task-clock/ {tc=$1/1000}
		/seconds time elapsed/ {w=$1} /seconds user/ {u=$1} /seconds sys/ {s=$1}
		END {printf "%-9s wall %6.2f s  cpu %6.2f s  user %6.2f  sys %5.2f  faults %8d  load %s\n", l, w, tc, u, s, pf, load}'
}
case $kind in
kernel)
	out=forkcost-vmlinux.o
	# Kbuild's command, whatever LD it named, run with ld.lld.
	set -- $(sed -n 's/^savedcmd_vmlinux\.o := //p' .vmlinux.o.cmd | sed "s/;.*//; s/ -o vmlinux\.o / -o $out /")
	shift
	i=0
	while [ $i -lt "$n" ]; do
		i=$((i + 1))
		run inprocess ld.lld "$@" --thinlto-cache-dir="$tmp/lldcache"
		rm -rf "$tmp/lldcache"
		run thindist "$td" link --no-cache --progress=never -- ld.lld "$@"
	done
	rm -f $out
	;;
lua)
	out=$tmp/a.out
	i=0
	while [ $i -lt "$n" ]; do
		i=$((i + 1))
		run inprocess clang -fuse-ld=lld -flto=thin -Wl,--thinlto-jobs=2 ./*.o -lm -o "$out"
		run thindist clang -fuse-ld=lld -flto=thin -fthinlto-distributor="$td" \
			-Xthinlto-distributor=--no-cache -Xthinlto-distributor=--jobs=2 ./*.o -lm -o "$out"
	done
	;;
*)
	echo "forkcost.sh: unknown kind $kind (kernel or lua)" >&2
	exit 2
	;;
esac
