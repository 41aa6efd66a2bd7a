# Sourced by scripts/install.sh, kernel-test.sh and kernel-bench.sh.
#
# build_thindist OUT: builds thindist from the checkout at $root into OUT,
# and the thindist-link front beside it (where the front looks for it).
# -buildvcs=auto records the commit (thindist --version, every run's
# record) even where GOFLAGS turns stamping off; where git cannot read the
# checkout (not one, another owner's), it builds without it.
# It runs in a subshell: the scripts that source it keep their variables.
build_thindist() (
	cd "$root" || exit 1
	for cmd in thindist thindist-link; do
		exe=$(dirname "$1")/$cmd
		[ $cmd = thindist-link ] || exe=$1
		go build -buildvcs=auto -o "$exe" ./cmd/$cmd 2>/dev/null ||
			go build -buildvcs=false -o "$exe" ./cmd/$cmd || exit 1
	done
)
