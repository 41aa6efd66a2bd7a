package worker

import "strings"

// The options the worker is tested with (see worker_test.go and docs/
// worker.md): a backend job with any other runs elsewhere. Options that
// take a separate value take the next argument with them.
var (
	testedExact = set("-c", "-w", "-faddrsig", "-fno-addrsig", "-fPIC", "-fpic", "-fPIE", "-fpie", "-fno-pic", "-fno-pie",
		"-ffunction-sections", "-fdata-sections", "-fno-function-sections", "-fno-data-sections",
		"-g", "-g0", "-g1", "-g2", "-g3", "-gline-tables-only",
		"-O0", "-O1", "-O2", "-O3", "-Os", "-Oz", "-Og", "-Wno-unused-command-line-argument")
	testedWithValue = set("-o", "-x", "-mllvm", "-target")
	testedPrefixes  = []string{"-fthinlto-index=", "--target=", "-march=", "-mcpu=", "-mtune=",
		"-fprofile-sample-use=", "-fdebug-prefix-map=", "-ffile-prefix-map="}

	// The code-generation options a Linux kernel's files are compiled with
	// (x86-64), which thindist link --compdb gives their backends
	// (TestKernelOptions).
	testedKernelExact = set("-m64", "-ffreestanding", "-fintegrated-as", "-fno-PIE",
		"-fno-common", "-fno-strict-aliasing", "-fno-strict-overflow", "-fshort-wchar", "-funsigned-char",
		"-fno-stack-protector", "-fno-stack-check", "-fno-stack-clash-protection",
		"-fno-delete-null-pointer-checks", "-fno-jump-tables", "-fno-asynchronous-unwind-tables",
		"-fomit-frame-pointer", "-fno-omit-frame-pointer",
		"-mno-sse", "-mno-sse2", "-mno-mmx", "-mno-3dnow", "-mno-avx", "-mno-80387", "-mno-fp-ret-in-387",
		"-mno-red-zone", "-mskip-rax-setup")
	testedKernelPrefixes = []string{"-fno-builtin-", "-fmacro-prefix-map=", "-fcf-protection=",
		"-falign-functions=", "-falign-loops=", "-mstack-alignment=", "-mcmodel=",
		"-ftrivial-auto-var-init=", "-fvisibility=", "-fstrict-flex-arrays="}
)

func set(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

// untested returns the first argument of argv (a compiler's command line,
// argv[0] the compiler) that the worker is not tested with, "" if none. The
// command must be a ThinLTO backend: with -fthinlto-index=, IR input.
func untested(argv []string) string {
	backend := false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			// an input file
		case testedExact[a], testedKernelExact[a], hasPrefix(a, testedKernelPrefixes):
		case testedWithValue[a] && i+1 < len(argv):
			i++
			if a == "-x" {
				if argv[i] != "ir" {
					return "-x " + argv[i]
				}
			}
		case hasPrefix(a, testedPrefixes):
			backend = backend || strings.HasPrefix(a, "-fthinlto-index=")
		default:
			return a
		}
	}
	if !backend {
		return "a command that is not a ThinLTO backend (no -fthinlto-index=)"
	}
	return ""
}

func hasPrefix(a string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}
