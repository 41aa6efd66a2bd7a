#!/bin/sh
# Builds a small x86_64 Linux kernel (Debian's linux-source-6.12, tinyconfig
# plus a serial console, /proc, an initramfs, CONFIG_LTO_CLANG_THIN and
# loadable modules: lib/'s test_static_key_base, test_static_keys,
# test_hexdump and test_dhry built =m) with `make LLVM=1`, four ways, and
# boots each under qemu (no KVM) to a tiny static init that prints a marker,
# loads the four modules with finit_module (their self-tests run in their
# init; test_dhry is three files, so its .o is a ThinLTO link of three
# modules), checks /proc/modules and prints a second marker:
#
#   inproc    LD=ld.lld: lld's own in-process ThinLTO (the reference)
#   thin      LD=<one line: thindist link --in-process-below=0 -- ld.lld "$@">
#             (every link distributed, however small)
#   compdb    the same with --compdb compile_commands.json (the kernel's own)
#   sections  the same with --compdb and --sections-as-compiled
#
# Every LTO link of the build goes through LD: vmlinux.o, each module's .o
# (`ld.lld -r`, in-process ThinLTO of its bitcode) and its .ko (which links
# the module with its bitcode .mod.o and .module-common.o). For each thindist
# variant the script checks, in thindist's records, that every module's .o
# and .ko link ran through thindist link's backends, and compares vmlinux
# with the reference: the entry point, the symbols, what objtool says about
# vmlinux.o and the modules, and the number of sections in vmlinux.o; and
# each module's code, relocations and symbols (which the plain variant must
# share with in-process; the others may differ, and say where). After the
# plain variant it relinks test_dhry's .o and .ko with the default
# --in-process-below, which leaves them to lld, and compares. The
# thindist variants relink vmlinux.o and the modules only: changing LD
# recompiles nothing but the single-file modules (their link is part of
# their compile command).
#
# Then, if a thindist-worker can be built (make -C worker), it relinks
# vmlinux.o with thindist link on the worker and with exec'd clang, plainly
# and with --compdb, and checks that every native object is byte-identical;
# and relinks it with lld's in-process ThinLTO, whose native objects must be
# the plain link's, byte for byte.
#
# With --modules-only it builds the modules alone (`make modules`, which
# compiles no built-in object and links no vmlinux: a few minutes, for CI),
# in-process and through thindist link, checks the records and objtool's
# output as above, that every module has in-process's code, relocations
# and symbols, and test_dhry's links left to lld; it boots nothing.
#
# Whole builds, timed: scripts/kernel-bench.sh.
#
# Usage: scripts/kernel-test.sh [--modules-only] [SCRATCH]
#   SCRATCH (default $THINDIST_KERNEL_SCRATCH or /var/tmp/thindist-kernel)
#   holds the extracted source, the build and the caches; reused by later runs.
#   THINDIST_KERNEL_JOBS (default 2) is make's -j. On a shared machine, run
#   it under nice: every process it starts inherits that.
# Needs Debian's linux-source-6.12 xz-utils, clang-22 lld-22 llvm-22, flex
# bison bc libelf-dev, and Go; to boot, also cpio qemu-system-x86; for the
# worker check also libclang-cpp22-dev libclang-22-dev llvm-22-dev.
# Downloads nothing.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
modules_only=0
if [ "${1:-}" = --modules-only ]; then
  modules_only=1
  shift
fi
scratch=${1:-${THINDIST_KERNEL_SCRATCH:-/var/tmp/thindist-kernel}}
jobs=${THINDIST_KERNEL_JOBS:-2}
llvm=/usr/lib/llvm-22/bin
tarball=/usr/src/linux-source-6.12.tar.xz
marker=THINDIST-KERNEL-BOOT-OK
modmarker=THINDIST-KERNEL-MODULES-OK
# The modules (lib/, =m) the init loads, in this order.
modules="test_static_key_base test_static_keys test_hexdump test_dhry"
export PATH="$llvm:$PATH"

mkdir -p "$scratch/bin" "$scratch/out"
scratch=$(cd "$scratch" && pwd)
src=$scratch/linux-source-6.12
out=$scratch/build
log=$scratch/out
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.1f'; }

if [ ! -f "$src/Makefile" ]; then
  echo "== extracting $tarball"
  tar -C "$scratch" -xf "$tarball"
fi

echo "== building thindist"
# shellcheck source=scripts/lib/build.sh
. "$root/scripts/lib/build.sh"
# shellcheck source=scripts/lib/kbuild.sh
. "$root/scripts/lib/kbuild.sh"
build_thindist "$scratch/bin/thindist"
# The LD= scripts: one line each, as a kernel developer would write them.
# The thin one distributes every link, however small (--in-process-below=0),
# so that every module link is checked through thindist's backends; the
# small one, written as docs/link.md advises, runs the thindist-link front
# with the default, which leaves the module links to lld (left_to_lld).
write_ld() {
  printf '#!/bin/sh\nexec %s --cache-dir=%s %s-- ld.lld "$@"\n' "$scratch/bin/$2" "$scratch/cache" "$3" > "$scratch/bin/ld-thindist-$1"
  chmod +x "$scratch/bin/ld-thindist-$1"
}
write_ld thin "thindist link" "--in-process-below=0 "
write_ld small thindist-link ""
write_ld compdb "thindist link" "--compdb=$out/compile_commands.json "
write_ld sections "thindist link" "--compdb=$out/compile_commands.json --sections-as-compiled "

echo "== configuring (tinyconfig + serial console + initramfs + ThinLTO)"
mkdir -p "$out"
cp "$root/scripts/kernel.config" "$scratch/thin.config"
if [ ! -f "$out/.config" ] || ! grep -q '^CONFIG_TEST_DHRY=m' "$out/.config"; then
  make -s -C "$src" O="$out" LLVM=1 tinyconfig >/dev/null
  "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$scratch/thin.config" >/dev/null
  make -s -C "$src" O="$out" LLVM=1 olddefconfig
fi
for opt in LTO_CLANG_THIN SERIAL_8250_CONSOLE BLK_DEV_INITRD OBJTOOL PROC_FS JUMP_LABEL MODULES; do
  grep -q "^CONFIG_$opt=y" "$out/.config" || { echo "CONFIG_$opt is not set" >&2; exit 1; }
done
for opt in TEST_STATIC_KEYS TEST_HEXDUMP TEST_DHRY; do
  grep -q "^CONFIG_$opt=m" "$out/.config" || { echo "CONFIG_$opt is not =m" >&2; exit 1; }
done

# The init: no libc, a few system calls. It prints the boot marker, mounts
# /proc, loads each module of the initramfs's /lib with finit_module (in
# order: test_static_keys uses test_static_key_base's keys), checks that
# /proc/modules lists them all, prints the modules marker and reboots. A
# module whose init fails (test_hexdump's and test_static_keys's self-tests
# return -EINVAL on a wrong result) fails finit_module: no modules marker.
cat > "$scratch/init.c" <<EOF
static long sys(long n, long a, long b, long c, long d, long e) {
  long r;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return r;
}
static unsigned long len(const char *s) { unsigned long n = 0; while (s[n]) n++; return n; }
static void say(const char *s) { sys(1, 1, (long)s, len(s), 0, 0); }
static void say_num(long v) {
  static char buf[24];
  int i = sizeof buf - 1, neg = v < 0;
  buf[i] = 0;
  if (neg) v = -v;
  do { buf[--i] = '0' + v % 10; v /= 10; } while (v);
  if (neg) buf[--i] = '-';
  say(buf + i);
}
static void stop(void) {
  sys(169, 0xfee1dead, 672274793, 0x01234567, 0, 0); /* reboot(LINUX_REBOOT_CMD_RESTART) */
  for (;;) {}
}
/* listed: whether a line of /proc/modules begins with "name ". */
static int listed(const char *text, long n, const char *name) {
  unsigned long k = len(name);
  for (long i = 0; i + (long)k < n; i++) {
    if (i > 0 && text[i - 1] != '\n') continue;
    unsigned long j = 0;
    while (j < k && text[i + j] == name[j]) j++;
    if (j == k && text[i + k] == ' ') return 1;
  }
  return 0;
}
static const char *const names[] = {"test_static_key_base", "test_static_keys", "test_hexdump", "test_dhry"};
static const char *const paths[] = {"/lib/test_static_key_base.ko", "/lib/test_static_keys.ko",
                                    "/lib/test_hexdump.ko", "/lib/test_dhry.ko"};
static const char *const params[] = {"", "", "", "run=1"};
static char text[8192];
void _start(void) {
  say("\n$marker\n");
  long r = sys(165, (long)"proc", (long)"/proc", (long)"proc", 0, 0); /* mount */
  if (r != 0) { say("init: mount /proc: "); say_num(r); say("\n"); stop(); }
  for (int m = 0; m < 4; m++) {
    long fd = sys(2, (long)paths[m], 0, 0, 0, 0); /* open, O_RDONLY */
    if (fd < 0) { say("init: open "); say(paths[m]); say(": "); say_num(fd); say("\n"); stop(); }
    r = sys(313, fd, (long)params[m], 0, 0, 0); /* finit_module */
    if (r != 0) { say("init: finit_module "); say(paths[m]); say(": "); say_num(r); say("\n"); stop(); }
    sys(3, fd, 0, 0, 0, 0);
  }
  long fd = sys(2, (long)"/proc/modules", 0, 0, 0, 0);
  long n = 0;
  while (fd >= 0 && n < (long)sizeof text - 1 && (r = sys(0, fd, (long)(text + n), sizeof text - 1 - n, 0, 0)) > 0) n += r;
  text[n] = 0;
  say("init: /proc/modules:\n"); say(text);
  for (int m = 0; m < 4; m++) {
    if (!listed(text, n, names[m])) { say("init: not in /proc/modules: "); say(names[m]); say("\n"); stop(); }
  }
  say("\n$modmarker\n");
  stop();
}
EOF
[ "$modules_only" = 1 ] || clang -O2 -static -nostdlib -ffreestanding -fno-builtin -fno-pic "$scratch/init.c" -o "$scratch/init"

# build VARIANT LD: make vmlinux, bzImage and the modules with that LD (with
# --modules-only, the modules alone); keeps the images, vmlinux.o, the
# modules and the build log under $log/VARIANT.*
build() {
  variant=$1 ld=$2
  # Kbuild relinks vmlinux.o and the modules when LD changes, and not when
  # the same LD runs again: remove them, so that every variant's log holds
  # its own links and objtool's output on them.
  for m in $modules; do rm -f "$out/lib/$m.o" "$out/lib/$m.ko"; done
  if [ "$modules_only" = 1 ]; then
    # `make modules` alone compiles no built-in object and links no
    # vmlinux.o; without one, modpost cannot resolve the modules' symbols
    # and says so (KBUILD_MODPOST_WARN=1 makes that a warning).
    set -- modules KBUILD_MODPOST_WARN=1
  else
    rm -f "$out/vmlinux.o"
    set -- vmlinux bzImage modules
  fi
  echo "== $variant: make -j$jobs LLVM=1 LD=$ld $*"
  t0=$(now)
  if ! make -C "$src" O="$out" LLVM=1 LD="$ld" -j"$jobs" "$@" > "$log/$variant.log" 2>&1; then
    tail -40 "$log/$variant.log" >&2
    echo "$variant: the kernel build failed (log: $log/$variant.log)" >&2
    exit 1
  fi
  echo "$variant: built in $(since "$t0") s"
  if [ "$modules_only" = 0 ]; then
    cp "$out/vmlinux" "$log/$variant.vmlinux"
    cp "$out/vmlinux.o" "$log/$variant.vmlinux.o"
    cp "$out/arch/x86/boot/bzImage" "$log/$variant.bzImage"
  fi
  rm -rf "$log/$variant.modules"
  mkdir -p "$log/$variant.modules"
  for m in $modules; do cp "$out/lib/$m.ko" "$log/$variant.modules/"; done
}

# boot VARIANT: boots its bzImage under qemu with the init and its modules
# as initramfs.
boot() {
  variant=$1
  {
    printf 'dir /dev 755 0 0\nnod /dev/console 600 0 0 c 5 1\ndir /proc 755 0 0\ndir /lib 755 0 0\n'
    printf 'file /init %s 755 0 0\n' "$scratch/init"
    for m in $modules; do printf 'file /lib/%s.ko %s 644 0 0\n' "$m" "$log/$variant.modules/$m.ko"; done
  } > "$log/$variant.initramfs.list"
  "$out/usr/gen_init_cpio" "$log/$variant.initramfs.list" | gzip -9 > "$log/$variant.initramfs.cpio.gz"
  t0=$(now)
  timeout 900 qemu-system-x86_64 -nographic -no-reboot -m 128M -cpu qemu64 \
    -kernel "$log/$variant.bzImage" -initrd "$log/$variant.initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1" > "$log/$variant.boot" 2>&1 || true
  if ! grep -q "^$marker" "$log/$variant.boot"; then
    tail -30 "$log/$variant.boot" >&2
    echo "$variant: no marker on the serial console (log: $log/$variant.boot)" >&2
    exit 1
  fi
  if ! grep -q "^$modmarker" "$log/$variant.boot" || ! grep -q 'test_hexdump: all [0-9]* tests passed' "$log/$variant.boot" ||
    ! grep -q 'Dhrystones per Second' "$log/$variant.boot"; then
    tail -30 "$log/$variant.boot" >&2
    echo "$variant: the modules did not load and run (log: $log/$variant.boot)" >&2
    exit 1
  fi
  echo "$variant: booted and loaded $(echo $modules | wc -w) modules (hexdump and static keys self-tests passed, dhrystone ran) in $(since "$t0") s"
}

# describe VMLINUX: its entry point, then its symbols (name and type).
entry() { llvm-readelf -h "$1" | awk '/Entry point/ {print $4}'; }
symbols() { llvm-nm "$1" | awk '{print $NF, $(NF-1)}' | sort; }
sections() { llvm-readelf -h "$1" | awk '/Number of section headers/ {print $NF}'; }
# objtool_says VARIANT: objtool's warnings in its build log (vmlinux.o's and
# the modules').
objtool_says() { grep -E '^vmlinux\.o.*warning|warning: objtool:' "$log/$1.log" | sed 's/^.*warning/warning/' | sort || true; }

# linked_through_thindist VARIANT: every module's ld.lld -r links (its .o
# and its .ko) went through thindist link and its backends: each left a
# record (thindist keeps one only for a link with bitcode) with backends.
linked_through_thindist() {
  variant=$1
  "$scratch/bin/thindist" report --list --cache-dir="$scratch/cache" > "$log/$variant.records"
  for m in $modules; do
    for o in "$m.ko" "$m.o"; do
      # "ID status wall N jobs N hits N compiled OUTPUT"; a single-file
      # module's .o is linked as lib/.tmp_<name>.o, then renamed.
      if ! awk -v o="$o" '($NF == "lib/" o || $NF == "lib/.tmp_" o) && $2 == "ok" && $4 > 0 {found = 1} END {exit !found}' "$log/$variant.records"; then
        cat "$log/$variant.records" >&2
        echo "$variant: no record of a thindist link with backends writing lib/$o" >&2
        exit 1
      fi
    done
  done
  echo "$variant: every module's .o and .ko link ran through thindist link ($(awk '$NF ~ /^lib\// {n += $4} END {print n}' "$log/$variant.records") backends in $(grep -c ' lib/' "$log/$variant.records") module links)"
}

# left_to_lld: with the default --in-process-below, a module's links are
# left to lld's in-process ThinLTO (their bitcode is far under it), here by
# the thindist-link front: test_dhry's .o link (three modules) and its .ko
# link, run again from the build's own commands into new files, say so,
# and make what the same links distributed make, byte for byte.
left_to_lld() {
  for o in test_dhry.o test_dhry.ko; do
    # Kbuild's command without its LD, up to objtool's run after it.
    args=$(saved_parts "$out/lib/.$o.cmd" | head -1 | cut -d' ' -f2-)
    for v in thin small; do
      # shellcheck disable=SC2046 # Kbuild's arguments, split as make's shell splits them
      if ! (cd "$out" && "$scratch/bin/ld-thindist-$v" $(echo "$args" | sed "s| -o lib/$o | -o lib/$o.$v |")) \
        2> "$log/small.$o.$v.log"; then
        cat "$log/small.$o.$v.log" >&2
        echo "small: lib/$o's link through ld-thindist-$v failed" >&2
        exit 1
      fi
    done
    if ! grep -q "left to lld's in-process ThinLTO" "$log/small.$o.small.log" ||
      grep -q "left to lld" "$log/small.$o.thin.log"; then
      cat "$log/small.$o.small.log" "$log/small.$o.thin.log" >&2
      echo "small: lib/$o's link was not left to lld by default, or was with --in-process-below=0" >&2
      exit 1
    fi
    if ! cmp "$out/lib/$o.thin" "$out/lib/$o.small"; then
      echo "small: lib/$o left to lld differs from its distributed link" >&2
      exit 1
    fi
    rm -f "$out/lib/$o.thin" "$out/lib/$o.small"
  done
  echo "small: test_dhry's .o and .ko links, left to lld by default ($(sed -n 's/.*(\(.*\): under.*/\1/p' "$log/small.test_dhry.o.small.log")), made what their distributed links make"
}

# compare_modules VARIANT: counts the modules whose code differs from the
# in-process build's: the disassembly with relocations, and the symbols
# (name and type); for the plain variant, linked in one lld process as
# in-process is, every byte.
compare_modules() {
  variant=$1 differ=0
  for m in $modules; do
    for v in inproc "$variant"; do
      llvm-objdump -d -r "$log/$v.modules/$m.ko" | tail -n +3 > "$log/$v.modules/$m.code"
      llvm-nm "$log/$v.modules/$m.ko" | awk '{print $NF, $(NF-1)}' | sort > "$log/$v.modules/$m.syms"
    done
    if ! cmp -s "$log/inproc.modules/$m.code" "$log/$variant.modules/$m.code" ||
      ! cmp -s "$log/inproc.modules/$m.syms" "$log/$variant.modules/$m.syms"; then
      echo "$variant: $m.ko's code or symbols differ from the in-process build's"
      differ=$((differ + 1))
    elif [ "$variant" = thin ] && ! cmp -s "$log/inproc.modules/$m.ko" "$log/$variant.modules/$m.ko"; then
      # lld 21 and later link in one process, as in-process does.
      echo "$variant: $m.ko is not byte-identical to the in-process build's"
      differ=$((differ + 1))
    fi
  done
  return "$differ"
}

# objtool_compare VARIANT: objtool's output against in-process's; more
# warnings fail.
objtool_compare() {
  variant=$1
  objtool_says "$variant" > "$log/$variant.objtool"
  if ! diff -q "$log/inproc.objtool" "$log/$variant.objtool" >/dev/null; then
    echo "$variant: objtool's warnings differ from the in-process build's:"
    diff "$log/inproc.objtool" "$log/$variant.objtool" || true
  fi
  if [ "$(wc -l < "$log/$variant.objtool")" -gt "$(wc -l < "$log/inproc.objtool")" ]; then
    echo "$variant: objtool warns more than for the in-process build" >&2
    exit 1
  fi
}

if [ "$modules_only" = 1 ]; then
  # The modules alone, without vmlinux (short enough for CI): in-process,
  # then through thindist link; nothing is booted, so the modules must
  # have in-process's code and relocations.
  build inproc ld.lld
  objtool_says inproc > "$log/inproc.objtool"
  rm -rf "$scratch/cache"
  build thin "$scratch/bin/ld-thindist-thin"
  linked_through_thindist thin
  objtool_compare thin
  compare_modules thin || exit 1
  echo "thin: $(echo $modules | wc -w) modules with in-process's code, relocations and symbols; objtool warnings: $(wc -l < "$log/thin.objtool") (in-process: $(wc -l < "$log/inproc.objtool"))"
  left_to_lld
  echo "kernel-test --modules-only: OK"
  exit 0
fi

# Reference: in-process ThinLTO.
build inproc ld.lld
boot inproc
objtool_says inproc > "$log/inproc.objtool"
symbols "$log/inproc.vmlinux" > "$log/inproc.syms"
echo "inproc: vmlinux.o has $(sections "$log/inproc.vmlinux.o") sections; objtool warnings: $(wc -l < "$log/inproc.objtool")"
# The kernel's own compilation database, from the .cmd files of the build
# (a separate target, after the objects exist).
make -s -C "$src" O="$out" LLVM=1 compile_commands.json

for variant in thin compdb sections; do
  rm -rf "$scratch/cache"
  build "$variant" "$scratch/bin/ld-thindist-$variant"
  boot "$variant"
  linked_through_thindist "$variant"
  if [ "$(entry "$log/$variant.vmlinux")" != "$(entry "$log/inproc.vmlinux")" ]; then
    echo "$variant: entry point $(entry "$log/$variant.vmlinux"), in-process $(entry "$log/inproc.vmlinux")" >&2
    exit 1
  fi
  symbols "$log/$variant.vmlinux" > "$log/$variant.syms"
  if ! diff -q "$log/inproc.syms" "$log/$variant.syms" >/dev/null; then
    diff "$log/inproc.syms" "$log/$variant.syms" | head -20 >&2
    if [ "$variant" = thin ]; then
      echo "$variant: the symbols differ from the in-process build's" >&2
      exit 1
    fi
    # Per-file options (e.g. init/'s -fno-function-sections) may inline
    # differently than in-process LTO, which ignores them.
    echo "$variant: $(diff "$log/inproc.syms" "$log/$variant.syms" | grep -c '^[<>]') symbol lines differ (per-file options)"
  fi
  objtool_compare "$variant"
  [ "$variant" != thin ] || left_to_lld
  # The plain variant's modules must have in-process's code; per-file
  # options (--compdb) and other sections may change it.
  if differ=$(compare_modules "$variant"); then
    echo "$variant: the modules have in-process's code, relocations and symbols"
  elif [ "$variant" = thin ]; then
    echo "$differ" >&2
    exit 1
  else
    echo "$differ"
  fi
  moved=$(diff "$(llvm-nm "$log/inproc.vmlinux" > "$log/inproc.nm"; echo "$log/inproc.nm")" \
    "$(llvm-nm "$log/$variant.vmlinux" > "$log/$variant.nm"; echo "$log/$variant.nm")" | grep -c '^<' || true)
  echo "$variant: entry point $(entry "$log/$variant.vmlinux") as in-process; $(wc -l < "$log/$variant.syms") symbols, $moved at another address; objtool warnings: $(wc -l < "$log/$variant.objtool") (in-process: $(wc -l < "$log/inproc.objtool")); vmlinux.o has $(sections "$log/$variant.vmlinux.o") sections (in-process: $(sections "$log/inproc.vmlinux.o"))"
done

# The worker: vmlinux.o relinked through thindist link on a thindist-worker
# and with exec'd clang (no worker, no fork server), plainly and with
# --compdb; every native object must be byte-identical, and the worker must
# have compiled every backend.
worker_check() {
  w=$root/worker/thindist-worker
  if [ -f /usr/lib/llvm-22/include/clang/Driver/Driver.h ]; then
    make -s -C "$root/worker"
  fi
  if [ ! -x "$w" ]; then
    echo "worker: skipped (no $w; make -C worker needs libclang-cpp22-dev)"
    return
  fi
  cd "$out"
  linkcmd=$(sed -n 's/^savedcmd_vmlinux\.o := //p' .vmlinux.o.cmd | sed 's/;.*//; s/ -o vmlinux\.o / -o worker-vmlinux.o /')
  set -- $linkcmd
  shift # Kbuild's $(LD)
  for mode in plain compdb; do
    compdb=
    [ $mode = compdb ] && compdb=--compdb=$out/compile_commands.json
    for runner in exec worker; do
      keep=$scratch/native/$mode-$runner cache=$scratch/cache-$mode-$runner
      rm -rf "$keep" "$cache"
      # --worker-idle=0: the link's own workers, no server left behind.
      if [ $runner = exec ]; then flags="--no-worker --no-fork-server"; else flags="--worker=$w --worker-idle=0"; fi
      t0=$(now)
      "$scratch/bin/thindist" link --progress=never --cache-dir="$cache" $flags $compdb \
        --keep-native-objects="$keep" -- ld.lld "$@" 2> "$log/worker.$mode-$runner.log" || {
        cat "$log/worker.$mode-$runner.log" >&2
        echo "worker: the $mode vmlinux.o link ($runner) failed" >&2
        exit 1
      }
      "$scratch/bin/thindist" report --json --cache-dir="$cache" > "$log/worker.$mode-$runner.json"
      echo "worker: $mode vmlinux.o link ($runner): $(find "$keep" -type f | wc -l) native objects in $(since "$t0") s"
    done
    actions=$(grep -c '"module":' "$log/worker.$mode-worker.json")
    on=$(grep -c '"worker": true' "$log/worker.$mode-worker.json" || true)
    if [ "$on" -ne "$actions" ]; then
      # The worker is tested with the kernel's options (internal/local/worker):
      # every backend, plain and with --compdb, must have run on it.
      sed -n 's/^ *"not_worker": "\(.*\)",*$/\1/p' "$log/worker.$mode-worker.json" | sort | uniq -c | sort -rn | head -3 >&2
      echo "worker: $mode: $on of $actions backends ran on the worker" >&2
      exit 1
    fi
    (cd "$scratch/native/$mode-exec" && find . -type f | sort) > "$log/worker.$mode-exec.list"
    (cd "$scratch/native/$mode-worker" && find . -type f | sort) > "$log/worker.$mode-worker.list"
    if ! diff "$log/worker.$mode-exec.list" "$log/worker.$mode-worker.list" >&2; then
      echo "worker: $mode: not the same native objects kept" >&2
      exit 1
    fi
    differ=0
    while read -r f; do
      if ! cmp -s "$scratch/native/$mode-exec/$f" "$scratch/native/$mode-worker/$f"; then
        echo "worker: $mode: $f differs from exec'd clang's" >&2
        differ=$((differ + 1))
      fi
    done < "$log/worker.$mode-exec.list"
    [ "$differ" -eq 0 ] || exit 1
    echo "worker: $mode: all $(wc -l < "$log/worker.$mode-exec.list") native objects byte-identical to exec'd clang's; $on of $actions backends on the worker"
  done
  rm -f "$out/worker-vmlinux.o"
}
worker_check

# As in-process: vmlinux.o relinked by lld's in-process ThinLTO, its native
# objects kept (--lto-obj-path), must have compiled exactly the objects the
# plain thindist link above compiled (byte for byte, as a multiset: lld
# numbers its objects, thindist names them), since thindist names every
# module as lld does in-process and its backends import in the same order.
inprocess_check() {
  kept=$scratch/native/plain-exec
  if [ ! -d "$kept" ]; then
    echo "in-process objects: skipped (no plain thindist link above)"
    return
  fi
  cd "$out"
  set -- $(sed -n 's/^savedcmd_vmlinux\.o := //p' .vmlinux.o.cmd | sed 's/;.*//; s/ -o vmlinux\.o / -o inproc-vmlinux.o /')
  shift # Kbuild's $(LD)
  rm -rf "$scratch/native/inproc"
  mkdir -p "$scratch/native/inproc"
  ld.lld "$@" --lto-obj-path="$scratch/native/inproc/lto" > "$log/inproc-objects.log" 2>&1 || {
    cat "$log/inproc-objects.log" >&2
    echo "in-process objects: the in-process vmlinux.o link failed" >&2
    exit 1
  }
  # lto1, lto2...: the modules' objects; "lto" is lld's own (empty) regular
  # LTO partition, which thindist's links do not make.
  (cd "$scratch/native/inproc" && find . -type f -name 'lto[0-9]*' -exec sha256sum {} + | cut -d' ' -f1 | sort) > "$log/inproc-objects.sums"
  (cd "$kept" && find . -type f -exec sha256sum {} + | cut -d' ' -f1 | sort) > "$log/thindist-objects.sums"
  if ! cmp -s "$log/inproc-objects.sums" "$log/thindist-objects.sums"; then
    echo "in-process objects: $(comm -13 "$log/inproc-objects.sums" "$log/thindist-objects.sums" | wc -l) of thindist's $(wc -l < "$log/thindist-objects.sums") native objects are not among in-process's $(wc -l < "$log/inproc-objects.sums")" >&2
    exit 1
  fi
  rm -f "$out/inproc-vmlinux.o"
  echo "in-process objects: all $(wc -l < "$log/thindist-objects.sums") native objects of vmlinux.o byte-identical to lld's in-process ones"
}
inprocess_check
echo "kernel-test: OK"
