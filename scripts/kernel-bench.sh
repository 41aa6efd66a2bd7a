#!/bin/sh
# Times whole kernel builds as the distributed ThinLTO RFC for Kbuild did
# (shared/seeds/kernel-distributed-thinlto-rfc.md): `make -jN vmlinux
# bzImage modules` from a clean build directory, then again after a
# one-file edit, for each way of linking:
#
#   nolto     no LTO (CONFIG_LTO_NONE), LD=ld.lld
#   inproc    ThinLTO, LD=ld.lld with its own cache (--thinlto-cache-dir):
#             lld's in-process ThinLTO, and its cached rebuild
#   thin      ThinLTO, LD=<thindist-link -- ld.lld> (`thindist link`'s
#             front: lld for the module links, thindist's workers, fork
#             server or exec for the others), thindist's cache
#   sections  as thin, with --sections-as-compiled (and --compdb when the
#             configuration compiles with section options: see below)
#   remote    as thin, with the remote execution flags in
#             $THINDIST_KERNEL_REMOTE (e.g. "--remote=grpc://HOST:8980
#             --remote-platform=OSFamily=linux"), under an instance name of
#             its own for each run of this script, so that its clean build
#             finds nothing in the remote cache. Not run unless asked for.
#             Its user and system times are the build machine's only: what
#             the cluster's workers spend is not counted.
#
# The kernel is scripts/kernel-test.sh's (tinyconfig plus kernel.config),
# or with THINDIST_KERNEL_CONFIG=defconfig x86_64's defconfig plus
# kernel.config (ThinLTO and the same four test modules): about half an hour a
# build on two cores against about 4 minutes for tinyconfig, so give it a SCRATCH of its
# own. Each variant has a build directory of its own. Before each clean build
# the caches are emptied and thindist's worker server is stopped, so the
# build starts it cold; the edit's rebuild, right after, finds both warm,
# as a developer's next build would.
#
# Every link of the build runs through a wrapper that logs its output and
# time. Reported per build: wall, user and system time of every process of
# the build (a cpuacct cgroup, so the worker server, which outlives the
# links that start it, is counted), the vmlinux.o link, the final links
# (vmlinux and Kbuild's .tmp_vmlinux*) and the module links. The table goes
# to SCRATCH/table.md; the per-link times to SCRATCH/out/VARIANT.*.links.
# With the thin variant, every module link of its build is then relinked
# from its saved command, THINDIST_KERNEL_RELINKS times (default 21) each
# way, interleaved with lld's in-process link of the same command: the
# medians go to SCRATCH/relinks.md (relink, below).
#
# With --sections-as-compiled and no compilation database every backend
# gets no section option, which is what Kbuild compiles every file with
# unless CONFIG_LD_DEAD_CODE_DATA_ELIMINATION (-ffunction-sections
# -fdata-sections, and --gc-sections at the link): only then does the
# sections variant need compile_commands.json at link time, which Kbuild
# writes only on request. Its wrapper then makes it again (Kbuild's
# gen_compile_commands.py, from the .cmd files of what is built so far)
# before a link when a .cmd file is newer, and that time is the link's.
#
# The edit appends a global to kernel/sys.c, so its bitcode and every
# backend importing from it change (a touch alone changes no bitcode); the
# file is restored afterwards.
#
# Usage: scripts/kernel-bench.sh [SCRATCH [VARIANT...]]
#   SCRATCH (default $THINDIST_KERNEL_BENCH_SCRATCH or
#   /var/tmp/thindist-kernel-bench) holds the source, the builds, caches.
#   THINDIST_KERNEL_JOBS (default 2) is make's -j; THINDIST_KERNEL_CONFIG
#   (default tinyconfig) the base configuration, above.
# Needs root (the cgroup), and what kernel-test.sh needs to build.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${1:-${THINDIST_KERNEL_BENCH_SCRATCH:-/var/tmp/thindist-kernel-bench}}
[ $# -gt 0 ] && shift
variants=${*:-nolto inproc thin sections}
case " $variants " in
*" remote "*) [ -n "${THINDIST_KERNEL_REMOTE:-}" ] || {
  echo "kernel-bench: the remote variant needs THINDIST_KERNEL_REMOTE (the --remote... flags)" >&2
  exit 2
} ;;
esac
jobs=${THINDIST_KERNEL_JOBS:-2}
config=${THINDIST_KERNEL_CONFIG:-tinyconfig}
case $config in
tinyconfig | defconfig) ;;
*)
  echo "kernel-bench: THINDIST_KERNEL_CONFIG is tinyconfig or defconfig, not $config" >&2
  exit 2
  ;;
esac
llvm=/usr/lib/llvm-22/bin
tarball=/usr/src/linux-source-6.12.tar.xz
export PATH="$llvm:$PATH"
# A CI variable would turn the worker server off (--worker-idle 0).
unset CI

mkdir -p "$scratch/bin" "$scratch/out"
scratch=$(cd "$scratch" && pwd)
src=$scratch/linux-source-6.12
log=$scratch/out
cg=/sys/fs/cgroup/cpuacct/thindist-kernel-bench
now() { date +%s%N; }

if [ ! -f "$src/Makefile" ]; then
  echo "== extracting $tarball"
  tar -C "$scratch" -xf "$tarball"
fi
mkdir -p "$cg" || { echo "kernel-bench: cannot make the cgroup $cg (needs root and cgroup v1 cpuacct)" >&2; exit 1; }

echo "== building thindist and its worker"
# shellcheck source=scripts/lib/build.sh
. "$root/scripts/lib/build.sh"
# shellcheck source=scripts/lib/kbuild.sh
. "$root/scripts/lib/kbuild.sh"
build_thindist "$scratch/bin/thindist"
if make -s -C "$root/worker" >/dev/null 2>&1; then
  cp "$root/worker/thindist-worker" "$scratch/bin/thindist-worker"
else
  rm -f "$scratch/bin/thindist-worker"
  echo "(no thindist-worker: the fork server and exec only)"
fi
thindist="$scratch/bin/thindist"
server="--server-dir=$scratch/server"
mkdir -p "$scratch/server"
chmod 700 "$scratch/server"

# ld_wrapper VARIANT COMMAND...: the LD of VARIANT, which runs COMMAND
# "$@" and logs "<output> <ms>" to $log/VARIANT.links.
ld_wrapper() {
  variant=$1
  shift
  pre=
  if [ "$variant" = sections ]; then
    b=$scratch/build-$variant
    pre="compdb=
if grep -q '^CONFIG_LD_DEAD_CODE_DATA_ELIMINATION=y' $b/.config; then
  [ -f $b/compile_commands.json ] && [ -z \"\$(find $b -name '*.cmd' -newer $b/compile_commands.json -print -quit)\" ] ||
    python3 $src/scripts/clang-tools/gen_compile_commands.py -d $b -o $b/compile_commands.json
  compdb=--compdb=$b/compile_commands.json
fi"
  fi
  cat > "$scratch/bin/ld-$variant" <<EOF
#!/bin/sh
t0=\$(date +%s%N)
$pre
$* "\$@"
rc=\$?
out=- prev=
for a in "\$@"; do [ "\$prev" = -o ] && out=\$a; prev=\$a; done
[ -z "\${THINDIST_BENCH_LINKS:-}" ] || echo "\$out \$(( (\$(date +%s%N) - t0) / 1000000 ))" >> "\$THINDIST_BENCH_LINKS"
exit \$rc
EOF
  chmod +x "$scratch/bin/ld-$variant"
}
ld_wrapper nolto ld.lld
ld_wrapper inproc ld.lld --thinlto-cache-dir="$scratch/cache-inproc"
thin_ld="$thindist-link --progress=never $server --cache-dir=$scratch/cache-thin -- ld.lld"
# shellcheck disable=SC2086 # the command's words
ld_wrapper thin $thin_ld
# shellcheck disable=SC2016 # $compdb is the wrapper's, set by its $pre
ld_wrapper sections "$thindist-link" --progress=never "$server" --cache-dir="$scratch/cache-sections" \
  --sections-as-compiled '$compdb' -- ld.lld
# shellcheck disable=SC2086 # the flags are words
ld_wrapper remote "$thindist-link" --progress=never "$server" --cache-dir="$scratch/cache-remote" \
  ${THINDIST_KERNEL_REMOTE:-} --remote-instance="kernel-bench-$(date +%s)" -- ld.lld

# configure VARIANT: a clean build directory with the kernel's configuration.
configure() {
  b=$scratch/build-$1
  rm -rf "$b"
  mkdir -p "$b"
  make -s -C "$src" O="$b" LLVM=1 "$config" >/dev/null
  "$src/scripts/kconfig/merge_config.sh" -m -O "$b" "$b/.config" "$root/scripts/kernel.config" >/dev/null
  if [ "$1" = nolto ]; then
    "$src/scripts/config" --file "$b/.config" -d LTO_CLANG_THIN -e LTO_NONE
  fi
  make -s -C "$src" O="$b" LLVM=1 olddefconfig
  lto=n want=y
  grep -q '^CONFIG_LTO_CLANG_THIN=y' "$b/.config" && lto=y
  [ "$1" != nolto ] || want=n
  if [ "$lto" != "$want" ]; then
    echo "kernel-bench: $1: CONFIG_LTO_CLANG_THIN is $lto in $b/.config, want $want" >&2
    exit 1
  fi
}

# build VARIANT PHASE: times make in VARIANT's build directory; appends a
# row "VARIANT PHASE wall user sys vmlinux.o final modules modmax" to
# $log/rows (seconds), and keeps the per-link times.
build() {
  variant=$1 phase=$2
  links=$log/$variant.$phase.links
  : > "$links"
  if [ "$phase" = clean ]; then
    "$thindist" server "$server" stop >/dev/null 2>&1 || true
    rm -rf "$scratch/cache-$variant"
  fi
  echo $$ > "$cg/cgroup.procs"
  u0=$(cat "$cg/cpuacct.usage_user") s0=$(cat "$cg/cpuacct.usage_sys") t0=$(now)
  if ! THINDIST_BENCH_LINKS=$links make -C "$src" O="$scratch/build-$variant" LLVM=1 \
    LD="$scratch/bin/ld-$variant" -j"$jobs" vmlinux bzImage modules > "$log/$variant.$phase.log" 2>&1; then
    tail -30 "$log/$variant.$phase.log" >&2
    echo "kernel-bench: $variant: the $phase build failed (log: $log/$variant.$phase.log)" >&2
    exit 1
  fi
  t1=$(now) u1=$(cat "$cg/cpuacct.usage_user") s1=$(cat "$cg/cpuacct.usage_sys")
  echo $$ > /sys/fs/cgroup/cpuacct/cgroup.procs
  awk -v v="$variant" -v p="$phase" -v w=$((t1 - t0)) -v u=$((u1 - u0)) -v s=$((s1 - s0)) '
    $1 == "vmlinux.o" { vo += $2 }
    $1 == "vmlinux" || $1 ~ /^\.tmp_vmlinux/ { fin += $2 }
    $1 ~ /^lib\/.*\.(ko|o)$/ { mod += $2; if ($2 > mx) mx = $2 }
    END { printf "%s %s %.1f %.1f %.1f %.2f %.2f %.2f %.2f\n", v, p, w / 1e9, u / 1e9, s / 1e9, vo / 1e3, fin / 1e3, mod / 1e3, mx / 1e3 }
  ' "$links" | tee -a "$log/rows"
}

cp "$src/kernel/sys.c" "$scratch/sys.c.orig"
trap 'cp "$scratch/sys.c.orig" "$src/kernel/sys.c"; echo $$ > /sys/fs/cgroup/cpuacct/cgroup.procs 2>/dev/null; rmdir "$cg" 2>/dev/null || true' EXIT
: > "$log/rows"
rm -f "$log"/*.links # an earlier run's variants are not this table's
for v in $variants; do
  echo "== $v"
  cp "$scratch/sys.c.orig" "$src/kernel/sys.c"
  configure "$v"
  build "$v" clean
  echo "int thindist_bench_edit = $(date +%s);" >> "$src/kernel/sys.c"
  build "$v" edit
  cp "$scratch/sys.c.orig" "$src/kernel/sys.c"
done
"$thindist" server "$server" stop >/dev/null 2>&1 || true

# The table: times in seconds; the ratios are against inproc's build of the
# same phase.
awk '
  { k = $1 " " $2; row[NR] = k; line[k] = $0; if ($1 == "inproc") ref[$2] = $3 }
  END {
    print "| build | phase | wall | × in-process | user | system | vmlinux.o link | final vmlinux links | module links (sum; longest) |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= NR; i++) {
      split(line[row[i]], f, " ")
      r = (f[2] in ref && ref[f[2]] > 0) ? sprintf("%.2f", f[3] / ref[f[2]]) : "–"
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s; %s |\n", f[1], f[2], f[3], r, f[4], f[5], f[6], f[7], f[8], f[9]
    }
  }' "$log/rows" > "$scratch/table.md"
echo "Configuration: $config plus scripts/kernel.config, make -j$jobs" >> "$scratch/table.md"
cat "$scratch/table.md"

# Each module link against the same link in-process, per phase: the
# issue's bound is 1.2× for every one.
for p in clean edit; do
  [ -f "$log/inproc.$p.links" ] || continue
  for v in thin sections remote; do
    [ -f "$log/$v.$p.links" ] || continue
    awk -v v="$v" -v p="$p" '
      FNR == NR { if ($1 ~ /^lib\//) ref[$1] = $2; next }
      $1 in ref && ref[$1] > 0 { r = $2 / ref[$1]; n++; if (r > mx) { mx = r; at = $1 } }
      END { if (n) printf "%s, %s: %d module links, the slowest against in-process %.2f× (%s)\n", v, p, n, mx, at }
    ' "$log/inproc.$p.links" "$log/$v.$p.links"
  done
done | tee "$scratch/modules.txt"

# relink: every module link of the thin variant's build (a module's .o and
# its .ko: the `-r` links of LD other than vmlinux.o's), relinked from its
# saved command THINDIST_KERNEL_RELINKS times (default 21) through thin's
# LD and as lld's own in-process link of the same command, interleaved,
# with the medians in SCRATCH/relinks.md: a single link within a build
# varies by ±40 % with what else make runs, too much for the issue's bound
# of 1.2 × per module link. A one-file module's bitcode, which the build
# replaced by the linked object, is compiled again from its saved compile
# command.
relink() {
  b=$scratch/build-thin tmp=$scratch/relink n=${THINDIST_KERNEL_RELINKS:-21}
  rm -rf "$tmp"
  mkdir -p "$tmp"
  echo "| link | in-process | \`thindist-link\` | × |" > "$scratch/relinks.md"
  echo "|---|---:|---:|---:|" >> "$scratch/relinks.md"
  find "$b" -name '.*.cmd' | sort | while read -r f; do
    saved_parts "$f" > "$tmp/parts"
    link=$(grep "^$scratch/bin/ld-thin " "$tmp/parts" | head -1 || true)
    [ -n "$link" ] || continue
    # shellcheck disable=SC2086 # the saved command's words
    set -- $link
    shift
    out= prev= r=
    for a in "$@"; do
      [ "$prev" = -o ] && out=$a
      [ "$a" = -r ] && r=1
      prev=$a
    done
    [ -n "$r" ] && [ "$out" != vmlinux.o ] || continue
    compile=$(grep '^clang ' "$tmp/parts" | head -1 || true)
    if [ -n "$compile" ]; then
      obj=$(echo "$compile" | sed 's/.* -o \([^ ]*\) .*/\1/')
      (cd "$b" && eval "$(echo "$compile" | sed "s| -o $obj | -o $tmp/bitcode.o |")") || return 1
      link=$(echo "$link" | sed "s| $obj | $tmp/bitcode.o |; s| $obj\$| $tmp/bitcode.o|")
    fi
    ip= th= i=0
    while [ $i -lt "$n" ]; do
      for w in $(if [ $((i % 2)) = 0 ]; then echo ld.lld thin; else echo thin ld.lld; fi); do
        # shellcheck disable=SC2086 # the command's words
        set -- $(echo "$link" | sed "s|^[^ ]* ||; s| -o $out | -o $tmp/out.o |")
        t0=$(now)
        # shellcheck disable=SC2086 # thin_ld's words
        if [ $w = thin ]; then (cd "$b" && $thin_ld "$@") 2>/dev/null; else (cd "$b" && ld.lld "$@"); fi || return 1
        t=$(( ($(now) - t0) / 1000 ))
        if [ $w = thin ]; then th="$th $t"; else ip="$ip $t"; fi
      done
      i=$((i + 1))
    done
    med() { echo "$@" | tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)] / 1000}'; }
    awk -v o="$out" -v a="$(med $ip)" -v b="$(med $th)" 'BEGIN { printf "| %s | %.1f ms | %.1f ms | %.2f |\n", o, a, b, b / a }' >> "$scratch/relinks.md"
  done
  echo "Each module link relinked $n times per way, interleaved; medians." >> "$scratch/relinks.md"
  cat "$scratch/relinks.md"
}
case " $variants " in
*" thin "*) relink || echo "kernel-bench: the module relinks failed" >&2 ;;
esac
