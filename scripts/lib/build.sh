# Sourced by scripts/install.sh, kernel-test.sh and kernel-bench.sh.
#
# build_thindist OUT: builds thindist from the checkout at $root into OUT.
# -buildvcs=auto records the commit (thindist --version, every run's
# record) even where GOFLAGS turns stamping off; where git cannot read the
# checkout (not one, another owner's), it builds without it.
build_thindist() {
	(cd "$root" && { go build -buildvcs=auto -o "$1" ./cmd/thindist 2>/dev/null ||
		go build -buildvcs=false -o "$1" ./cmd/thindist; })
}
