# Sourced by scripts/install.sh, kernel-test.sh and kernel-bench.sh.
#
# build_thindist OUT: builds thindist from the checkout at $root into OUT,
# and the thindist-link front beside it (where the front looks for it).
# -buildvcs=auto records the commit (thindist --version, every run's
# record) even where GOFLAGS turns stamping off; where git cannot read the
# checkout (not one, another owner's), it builds without it.
build_thindist() {
	for cmd in thindist thindist-link; do
		out=$(dirname "$1")/$cmd
		[ $cmd = thindist-link ] || out=$1
		(cd "$root" && { go build -buildvcs=auto -o "$out" ./cmd/$cmd 2>/dev/null ||
			go build -buildvcs=false -o "$out" ./cmd/$cmd; }) || return 1
	done
}
