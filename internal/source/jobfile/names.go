package jobfile

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// NameMembers renames the actions that compile archive members after the
// archive where it really is, as the user named it on the link line:
// "lib/libutil.a(util.o)". lld copies a regular archive's members next to
// its output under the archive's base name ("OUT/libutil.a(util.o at
// 88).2.9A6.o"), a file the user never sees and an archive that does not
// exist there. The archive is found among linker's arguments (lld's
// command line): a file, or an -l library found in an -L directory, of
// that base name; when none or several are, the member is named after the
// archive's base name alone ("libutil.a(util.o)"). dir is the directory
// the linker ran in. Other actions keep their names.
func NameMembers(actions []*action.Action, linker []string, dir string) {
	archives := archivesOf(linker, dir)
	for _, a := range actions {
		name := action.ModuleName(a.ID)
		if name == a.ID {
			continue // not lld's copy of a member (a thin archive's member is itself)
		}
		open := strings.IndexByte(name, '(')
		base := filepath.Base(name[:open])
		ar := base
		if cands := archives[base]; len(cands) == 1 {
			ar = cands[0]
		}
		a.ID = ar + name[open:]
	}
}

// archivesOf maps the base name of each archive linker names to the paths
// it names it by (deduplicated).
func archivesOf(linker []string, dir string) map[string][]string {
	var libDirs, libs []string
	var files []string
	for i := 1; i < len(linker); i++ {
		a := linker[i]
		next := func() string {
			if i+1 < len(linker) {
				i++
				return linker[i]
			}
			return ""
		}
		switch {
		case a == "-L" || a == "--library-path":
			libDirs = append(libDirs, next())
		case strings.HasPrefix(a, "--library-path="):
			libDirs = append(libDirs, a[len("--library-path="):])
		case strings.HasPrefix(a, "-L"):
			libDirs = append(libDirs, a[2:])
		case a == "-l" || a == "--library":
			libs = append(libs, next())
		case strings.HasPrefix(a, "--library="):
			libs = append(libs, a[len("--library="):])
		case strings.HasPrefix(a, "-l"):
			libs = append(libs, a[2:])
		case a == "-o" || a == "-m" || a == "-T" || a == "-z" || a == "-e" || a == "-soname" || a == "-rpath":
			next()
		case !strings.HasPrefix(a, "-") && strings.HasSuffix(a, ".a"):
			files = append(files, a)
		}
	}
	for _, l := range libs {
		name := "lib" + l + ".a"
		if n, ok := strings.CutPrefix(l, ":"); ok {
			name = n
		}
		for _, d := range libDirs {
			if p := filepath.Join(d, name); isFile(p, dir) {
				files = append(files, p)
				break
			}
		}
	}
	out := map[string][]string{}
	seen := map[string]bool{}
	for _, f := range files {
		abs := f
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(dir, abs)
		}
		abs = filepath.Clean(abs)
		if seen[abs] || !isFile(f, dir) {
			continue
		}
		seen[abs] = true
		b := filepath.Base(f)
		out[b] = append(out[b], f)
	}
	return out
}

func isFile(p, dir string) bool {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
