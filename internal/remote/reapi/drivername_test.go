package reapi

import "testing"

func TestDriverName(t *testing.T) {
	for path, want := range map[string]string{
		"/usr/lib/llvm-22/bin/clang":         "clang",
		"/usr/bin/clang-22":                  "clang",
		"clang22":                            "clang",
		"clang-22.1.3":                       "clang",
		"clang++-22":                         "clang++",
		"/opt/bin/clang-cl-19":               "clang-cl",
		"x86_64-linux-gnu-clang-22":          "x86_64-linux-gnu-clang",
		"aarch64-linux-gnu-clang++":          "aarch64-linux-gnu-clang++",
		"clang.exe":                          "clang",
		"clang-cpp-22":                       "clang-cpp",
		"/usr/local/bin/ccache":              "ccache",
		"/usr/bin/thindist-test-compiler.sh": "thindist-test-compiler.sh",
	} {
		if got := driverName(path); got != want {
			t.Errorf("driverName(%q) = %q, want %q", path, got, want)
		}
	}
}
