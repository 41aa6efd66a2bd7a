# Sourced by scripts/install.sh and scripts/test.sh.
#
# need_packages PKG...: installs the Debian packages of the list that are not
# installed yet (apt-get update first, once per script), as root or through
# sudo. Packages already installed cost one dpkg-query and no apt run, so the
# scripts stay quick on a machine that has everything.
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
apt_updated=""

need_packages() {
	missing=""
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
			missing="$missing $p"
		fi
	done
	[ -n "$missing" ] || return 0
	echo "installing Debian packages:$missing" >&2
	if [ -z "$apt_updated" ]; then
		$SUDO apt-get update -qq
		apt_updated=1
	fi
	# shellcheck disable=SC2086
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}
