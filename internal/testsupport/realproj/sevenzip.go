package realproj

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// SevenZipPackage is the Debian source package BuildSevenZip expects:
// bookworm's p7zip (16.02+really26.xx) carries 7-Zip 26's sources.
const SevenZipPackage = "p7zip"

// sevenZipFlags are added to upstream's own (-O2 and its defines): ThinLTO
// and debug info, as a distribution builds it.
const sevenZipFlags = "-flto=thin -g"

// BuildSevenZip compiles 7-Zip's console program 7zz (C++ and C, 311
// modules) from the unpacked source tree src with upstream's makefiles for
// clang (CPP/7zip/Bundles/Alone2, cmpl_clang.mak), into a copy of the tree
// under dir: upstream builds inside its tree. Make's own dependency
// tracking keeps objects of an earlier call that are up to date. The
// returned Build links 7zz from its objects, in upstream's link order.
func BuildSevenZip(ctx context.Context, tc Toolchain, src, dir string) (*Build, error) {
	var err error
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	tree := filepath.Join(dir, "src")
	if _, err := os.Stat(filepath.Join(tree, "CPP")); err != nil {
		if err := os.MkdirAll(tree, 0o755); err != nil {
			return nil, err
		}
		// cp -a keeps the sources' times, so a later call's make sees
		// its objects as newer.
		if err := run(ctx, dir, "cp", "-a", filepath.Join(src, "C"), filepath.Join(src, "CPP"), tree); err != nil {
			return nil, fmt.Errorf("7-Zip sources: %w", err)
		}
	}
	bundle := filepath.Join(tree, "CPP", "7zip", "Bundles", "Alone2")
	cxx := filepath.Join(filepath.Dir(tc.Clang), "clang++")
	if _, err := os.Stat(cxx); err != nil {
		return nil, fmt.Errorf("7-Zip needs clang++ beside %s: %w", tc.Clang, err)
	}
	mk := []string{"-f", "../../cmpl_clang.mak", "CC=" + tc.Clang, "CXX=" + cxx, "DISABLE_RAR=1",
		"CFLAGS_WARN_WALL=", "CFLAGS_WARN=", "DEB_7Z_CFLAGS=" + sevenZipFlags, "DEB_7Z_CXXFLAGS=" + sevenZipFlags}
	list := exec.CommandContext(ctx, "make", append([]string{"-s", "--eval=thindist-objs: ; @echo $(OBJS)", "thindist-objs"}, mk...)...)
	list.Dir = bundle
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("7-Zip: listing the objects of 7zz: %v", err)
	}
	objs := strings.Fields(string(out))
	if len(objs) < 100 {
		return nil, fmt.Errorf("7-Zip: only %d objects listed for 7zz", len(objs))
	}
	if err := run(ctx, bundle, "make", append(append([]string{"-s", fmt.Sprintf("-j%d", runtime.NumCPU())}, mk...), objs...)...); err != nil {
		return nil, fmt.Errorf("7-Zip: %w", err)
	}
	return &Build{
		Name:    "7zip",
		Dir:     bundle,
		Objects: objs,
		Libs:    []string{"-lstdc++", "-lpthread", "-ldl"},
		CFlags:  []string{"-O2"},
		Modules: len(objs),
	}, nil
}
