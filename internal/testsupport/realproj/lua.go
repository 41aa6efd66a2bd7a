package realproj

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// LuaPackage is the Debian source package BuildLua expects.
const LuaPackage = "lua5.4"

// luaFlags are upstream's Makefile flags for `make linux` (LUA_USE_LINUX:
// POSIX and dlopen; no readline, so the build needs no -dev package), with
// ThinLTO.
var luaFlags = []string{"-O2", "-flto=thin", "-Wall", "-DLUA_COMPAT_5_3", "-DLUA_USE_LINUX"}

// BuildLua compiles lua5.4 from the unpacked source tree src (Debian's, with
// its patches applied) into dir as upstream builds it: every src/*.c except
// the two programs into objects archived as liblua.a (a regular static
// archive), and lua.c into lua.o. The returned Build links the `lua`
// interpreter. dir is created if needed; existing objects are rebuilt.
func BuildLua(ctx context.Context, tc Toolchain, src, dir string) (*Build, error) {
	srcDir := filepath.Join(src, "src")
	entries, err := os.ReadDir(srcDir)
	if err != nil {
		return nil, fmt.Errorf("lua5.4 sources: %w", err)
	}
	var lib []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".c") && n != "lua.c" && n != "luac.c" {
			lib = append(lib, n)
		}
	}
	sort.Strings(lib)
	if len(lib) < 20 {
		return nil, fmt.Errorf("lua5.4 sources: only %d library sources in %s", len(lib), srcDir)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Debian's patch 0002 makes luaconf.h include a header that
	// debian/rules generates; write it into the build directory, leaving
	// the source tree untouched.
	hdr := fmt.Sprintf("#ifndef _LUA_DEB_MULTIARCH_\n#define _LUA_DEB_MULTIARCH_\n"+
		"#define DEB_HOST_MULTIARCH %q\n#endif\n", multiarch())
	if err := os.WriteFile(filepath.Join(dir, "lua5.4-deb-multiarch.h"), []byte(hdr), 0o644); err != nil {
		return nil, err
	}
	flags := append(append([]string{}, luaFlags...), "-I", dir)
	objs, err := compileAll(ctx, tc, srcDir, dir, append(lib, "lua.c"), flags)
	if err != nil {
		return nil, err
	}
	libObjs, main := objs[:len(lib)], objs[len(lib)]
	os.Remove(filepath.Join(dir, "liblua.a"))
	if err := run(ctx, dir, tc.AR, append([]string{"rcs", "liblua.a"}, libObjs...)...); err != nil {
		return nil, err
	}
	return &Build{
		Name:     "lua",
		Dir:      dir,
		Objects:  []string{main},
		Archives: []string{"liblua.a"},
		// -Wl,-E exports the API for C modules, as upstream links lua.
		Libs:    []string{"-Wl,-E", "-lm", "-ldl"},
		CFlags:  []string{"-O2"},
		Modules: len(objs),
	}, nil
}

// multiarch is Debian's DEB_HOST_MULTIARCH for this machine (it only names
// the C module search path compiled into the interpreter).
func multiarch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64-linux-gnu"
	case "arm64":
		return "aarch64-linux-gnu"
	case "386":
		return "i386-linux-gnu"
	}
	return runtime.GOARCH + "-linux-gnu"
}
