#!/bin/sh
# Builds a small x86_64 Linux kernel (Debian's linux-source-6.12, tinyconfig
# plus a serial console, an initramfs and CONFIG_LTO_CLANG_THIN) with
# `make LLVM=1`, three ways, and boots each under qemu (no KVM) to a tiny
# static init that prints a marker:
#
#   inproc   LD=ld.lld: lld's own in-process ThinLTO (the reference)
#   thin     LD=<one line: thindist link -- ld.lld "$@">
#   compdb   the same with --compdb compile_commands.json (the kernel's own)
#
# and compares each thindist vmlinux with the reference: the entry point, the
# symbols, and what objtool says about vmlinux.o. The second and third
# variants only relink (the objects are the same; changing LD recompiles
# nothing). With THINDIST_KERNEL_BENCH=1 it then times the vmlinux.o link
# alone, ld.lld in-process against thindist link without a cache, a link
# without bitcode, and the relink after editing one .c file with warm caches
# (lld's --thinlto-cache-dir, thindist's cache); that part has not yet been
# run end to end (bench/history/JOURNAL.md has the figures taken by hand).
#
# Usage: scripts/kernel-test.sh [SCRATCH]
#   SCRATCH (default $THINDIST_KERNEL_SCRATCH or /var/tmp/thindist-kernel)
#   holds the extracted source, the build and the caches; reused by later runs.
#   THINDIST_KERNEL_JOBS (default 2) is make's -j.
# Needs Debian's linux-source-6.12, clang-22 lld-22 llvm-22, flex bison bc
# libelf-dev cpio qemu-system-x86, and Go. Downloads nothing.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${1:-${THINDIST_KERNEL_SCRATCH:-/var/tmp/thindist-kernel}}
jobs=${THINDIST_KERNEL_JOBS:-2}
llvm=/usr/lib/llvm-22/bin
tarball=/usr/src/linux-source-6.12.tar.xz
marker=THINDIST-KERNEL-BOOT-OK
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
(cd "$root" && go build -o "$scratch/bin/thindist" ./cmd/thindist)
# The LD= scripts: one line each, as a kernel developer would write them.
cat > "$scratch/bin/ld-thindist" <<EOF
#!/bin/sh
exec $scratch/bin/thindist link --cache-dir=$scratch/cache -- ld.lld "\$@"
EOF
cat > "$scratch/bin/ld-thindist-compdb" <<EOF
#!/bin/sh
exec $scratch/bin/thindist link --cache-dir=$scratch/cache --compdb=$out/compile_commands.json -- ld.lld "\$@"
EOF
chmod +x "$scratch/bin/ld-thindist" "$scratch/bin/ld-thindist-compdb"

echo "== configuring (tinyconfig + serial console + initramfs + ThinLTO)"
mkdir -p "$out"
cat > "$scratch/thin.config" <<'EOF'
CONFIG_64BIT=y
CONFIG_PRINTK=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_BINFMT_ELF=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_RD_GZIP=y
# CONFIG_RD_BZIP2 is not set
# CONFIG_RD_LZMA is not set
# CONFIG_RD_XZ is not set
# CONFIG_RD_LZO is not set
# CONFIG_RD_LZ4 is not set
# CONFIG_RD_ZSTD is not set
CONFIG_LTO_CLANG_THIN=y
EOF
if [ ! -f "$out/.config" ] || ! grep -q '^CONFIG_LTO_CLANG_THIN=y' "$out/.config"; then
  make -s -C "$src" O="$out" LLVM=1 tinyconfig >/dev/null
  "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$scratch/thin.config" >/dev/null
  make -s -C "$src" O="$out" LLVM=1 olddefconfig
fi
for opt in LTO_CLANG_THIN SERIAL_8250_CONSOLE BLK_DEV_INITRD OBJTOOL; do
  grep -q "^CONFIG_$opt=y" "$out/.config" || { echo "CONFIG_$opt is not set" >&2; exit 1; }
done

# The init: no libc, two system calls (write the marker, reboot).
cat > "$scratch/init.c" <<EOF
static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
void _start(void) {
  static const char msg[] = "\n$marker\n";
  sys3(1, 1, (long)msg, sizeof msg - 1);
  sys3(169, 0xfee1dead, 672274793, 0x01234567); /* reboot(LINUX_REBOOT_CMD_RESTART) */
  for (;;) {}
}
EOF
clang -O2 -static -nostdlib -ffreestanding -fno-pic "$scratch/init.c" -o "$scratch/init"

# build VARIANT LD: make vmlinux and bzImage with that LD; keeps the images
# and the build log under $log/VARIANT.*
build() {
  variant=$1 ld=$2
  echo "== $variant: make -j$jobs LLVM=1 LD=$ld"
  t0=$(now)
  if ! make -C "$src" O="$out" LLVM=1 LD="$ld" -j"$jobs" vmlinux bzImage > "$log/$variant.log" 2>&1; then
    tail -40 "$log/$variant.log" >&2
    echo "$variant: the kernel build failed (log: $log/$variant.log)" >&2
    exit 1
  fi
  echo "$variant: built in $(since "$t0") s"
  cp "$out/vmlinux" "$log/$variant.vmlinux"
  cp "$out/arch/x86/boot/bzImage" "$log/$variant.bzImage"
}

# boot VARIANT: boots its bzImage under qemu with the init as initramfs.
boot() {
  variant=$1
  if [ ! -f "$scratch/initramfs.cpio.gz" ]; then
    printf 'dir /dev 755 0 0\nnod /dev/console 600 0 0 c 5 1\nfile /init %s 755 0 0\n' "$scratch/init" > "$scratch/initramfs.list"
    "$out/usr/gen_init_cpio" "$scratch/initramfs.list" | gzip -9 > "$scratch/initramfs.cpio.gz"
  fi
  t0=$(now)
  timeout 600 qemu-system-x86_64 -nographic -no-reboot -m 128M -cpu qemu64 \
    -kernel "$log/$variant.bzImage" -initrd "$scratch/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1" > "$log/$variant.boot" 2>&1 || true
  if grep -q "^$marker" "$log/$variant.boot"; then
    echo "$variant: booted to the init's marker in $(since "$t0") s"
  else
    tail -30 "$log/$variant.boot" >&2
    echo "$variant: no marker on the serial console (log: $log/$variant.boot)" >&2
    exit 1
  fi
}

# describe VMLINUX: its entry point, then its symbols (name and type).
entry() { llvm-readelf -h "$1" | awk '/Entry point/ {print $4}'; }
symbols() { llvm-nm "$1" | awk '{print $NF, $(NF-1)}' | sort; }
objtool_says() { grep -E '^(vmlinux\.o|.*objtool).*warning' "$log/$1.log" | sed 's/^.*warning/warning/' | sort || true; }

# Reference: in-process ThinLTO.
build inproc ld.lld
boot inproc

for variant in thin compdb; do
  if [ "$variant" = compdb ]; then
    # The kernel's own compilation database, from the .cmd files of the
    # build (a separate target, after the objects exist).
    make -s -C "$src" O="$out" LLVM=1 compile_commands.json
    ld="$scratch/bin/ld-thindist-compdb"
  else
    ld="$scratch/bin/ld-thindist"
  fi
  rm -rf "$scratch/cache"
  build "$variant" "$ld"
  boot "$variant"
  if [ "$(entry "$log/$variant.vmlinux")" != "$(entry "$log/inproc.vmlinux")" ]; then
    echo "$variant: entry point $(entry "$log/$variant.vmlinux"), in-process $(entry "$log/inproc.vmlinux")" >&2
    exit 1
  fi
  symbols "$log/inproc.vmlinux" > "$log/inproc.syms"
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
  objtool_says inproc > "$log/inproc.objtool"
  objtool_says "$variant" > "$log/$variant.objtool"
  if [ "$(wc -l < "$log/$variant.objtool")" -gt "$(wc -l < "$log/inproc.objtool")" ]; then
    cat "$log/$variant.objtool" >&2
    echo "$variant: objtool warns more than for the in-process build" >&2
    exit 1
  fi
  moved=$(diff "$(llvm-nm "$log/inproc.vmlinux" > "$log/inproc.nm"; echo "$log/inproc.nm")" \
    "$(llvm-nm "$log/$variant.vmlinux" > "$log/$variant.nm"; echo "$log/$variant.nm")" | grep -c '^<' || true)
  echo "$variant: entry point $(entry "$log/$variant.vmlinux") as in-process; $(wc -l < "$log/$variant.syms") symbols, $moved at another address; objtool warnings: $(wc -l < "$log/$variant.objtool") (in-process: $(wc -l < "$log/inproc.objtool"))"
done
echo "kernel-test: OK"

[ "${THINDIST_KERNEL_BENCH:-0}" = 1 ] || exit 0
# Timings (recorded in bench/history/JOURNAL.md). First the vmlinux.o link alone,
# as Kbuild runs it (without the objtool run that follows it), in-process
# (Kbuild's --thinlto-cache-dir overridden by an empty one)
# and through thindist without a cache, alternating, twice each.
cd "$out"
linkcmd=$(sed -n 's/^savedcmd_vmlinux\.o := //p' .vmlinux.o.cmd | sed 's/;.*//; s/ -o vmlinux\.o / -o bench-vmlinux.o /')
set -- $linkcmd
shift # Kbuild's $(LD)
for round in 1 2; do
  t0=$(now); ld.lld "$@" --thinlto-cache-dir="$scratch/nocache-$round" >/dev/null
  echo "bench: vmlinux.o link, ld.lld in-process (no cache), run $round: $(since "$t0") s"
  rm -rf "$scratch/nocache-$round"
  t0=$(now); "$scratch/bin/thindist" link --no-cache --progress=never -- ld.lld "$@" 2>/dev/null
  echo "bench: vmlinux.o link, thindist link (no cache), run $round: $(since "$t0") s"
done
rm -f bench-vmlinux.o
# A link without bitcode, as Kbuild's final vmlinux links are (their input
# is the native vmlinux.o): run as is by thindist; five runs each.
for tool in ld.lld thindist; do
  t0=$(now)
  for i in 1 2 3 4 5; do
    if [ $tool = ld.lld ]; then
      ld.lld -m elf_x86_64 -r -o bench-native.o vmlinux.o
    else
      "$scratch/bin/thindist" link -- ld.lld -m elf_x86_64 -r -o bench-native.o vmlinux.o
    fi
  done
  echo "bench: a link of the native vmlinux.o (no bitcode), $tool: $(echo "($(now) - $t0) * 1000 / 5" | bc | xargs printf '%.0f') ms per link"
done
rm -f bench-native.o
# The relink after editing one .c file, with warm caches: lld's own
# in-process (Kbuild 6.12 passes no --thinlto-cache-dir to the vmlinux.o
# link, so LD gives it one), thindist's for thindist.
# The edit adds a global to kernel/sys.c, so its bitcode (and every backend
# that imports from it) really changes: a touch alone leaves the bitcode as
# it was and every backend a cache hit. The file is restored afterwards.
cd "$src"
cp kernel/sys.c "$scratch/sys.c.orig"
trap 'cp "$scratch/sys.c.orig" "$src/kernel/sys.c"' EXIT
relink() {
  variant=$1 ld=$2
  cp "$scratch/sys.c.orig" kernel/sys.c
  make -C "$src" O="$out" LLVM=1 LD="$ld" -j"$jobs" vmlinux > "$log/$variant.warm.log" 2>&1 # warms the caches
  echo "int thindist_bench_edit = $(date +%s);" >> kernel/sys.c
  t0=$(now)
  make -C "$src" O="$out" LLVM=1 LD="$ld" -j"$jobs" vmlinux > "$log/$variant.relink.log" 2>&1
  echo "bench: make vmlinux after editing kernel/sys.c, $variant (warm cache): $(since "$t0") s"
}
relink inproc "ld.lld --thinlto-cache-dir=$scratch/lld-cache"
relink thin "$scratch/bin/ld-thindist"
