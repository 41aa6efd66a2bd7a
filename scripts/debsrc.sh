#!/bin/sh
# debsrc.sh PKG DEST: unpack the Debian source package PKG under DEST
# (DEST/PKG-VERSION/), for tests that build a real project. Idempotent: when an
# unpacked tree of PKG is already in DEST it does nothing.
#
# It makes sure apt knows a deb-src entry (a copy of the deb.debian.org
# bookworm entries with Types: deb-src, in
# /etc/apt/sources.list.d/thindist-debsrc.sources), runs apt-get update only
# when it had to add that entry or apt has no source index yet, and needs
# dpkg-dev (dpkg-source) to unpack. Run it as root, or with sudo available,
# when the entry or dpkg-dev is missing.
set -eu

if [ $# -ne 2 ]; then
	echo "usage: $0 PKG DEST" >&2
	exit 2
fi
pkg=$1
dest=$2

# Already unpacked? dpkg-source leaves PKG-VERSION/debian/changelog.
for d in "$dest"/"$pkg"-*/; do
	if [ -f "$d/debian/changelog" ]; then
		echo "debsrc: $pkg already unpacked in ${d%/}"
		exit 0
	fi
done

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
fi

list=/etc/apt/sources.list.d/thindist-debsrc.sources
need_update=
if ! grep -rqsE '^(Types:.*deb-src|deb-src[[:space:]])' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	echo "debsrc: adding deb-src entries in $list"
	$SUDO tee "$list" >/dev/null <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
	need_update=1
fi
if ! ls /var/lib/apt/lists/*_Sources* >/dev/null 2>&1; then
	need_update=1
fi
if [ -n "$need_update" ]; then
	$SUDO apt-get update -qq
fi
if ! command -v dpkg-source >/dev/null 2>&1; then
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev
fi

mkdir -p "$dest"
cd "$dest"
# Download first (resumable, verifiable), then unpack from the local files.
apt-get source --download-only -qq "$pkg"
dsc=$(ls -t "$pkg"_*.dsc | head -n 1)
dpkg-source --no-check -x "$dsc" >/dev/null
for d in "$pkg"-*/; do
	if [ -f "$d/debian/changelog" ]; then
		echo "debsrc: $pkg unpacked in $dest/${d%/}"
		exit 0
	fi
done
echo "debsrc: unpacking $dsc produced no $pkg-* tree in $dest" >&2
exit 1
