package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// recordProgram writes a two-module program: main.c calls f from util.c,
// which is small enough for the thin link to import into main.o, and
// util.o is linked from the archive libutil.a (so lld copies it out under
// a temporary name).
func recordProgram(t *testing.T, dir string, factor int, flags ...string) {
	t.Helper()
	files := map[string]string{
		"main.c": "int f(int);\nint main(int argc, char **argv) { (void)argv; return f(argc) == 0; }\n",
		"util.c": fmt.Sprintf("int f(int x) { return x * %d + 1; }\n", factor),
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(append([]string{clang, "-flto=thin", "-O2", "-c", "main.c", "util.c"}, flags...)...)
	os.Remove(filepath.Join(dir, "libutil.a"))
	run(filepath.Join(llvmBin, "llvm-ar"), "rc", "libutil.a", "util.o")
}

// dtltoLink links the record program through thindist as lld's
// distributor, with the cache (and records) in cache.
func dtltoLink(t *testing.T, dir, cache, out string, flags ...string) {
	t.Helper()
	if b, err := dtltoRun(t, dir, cache, append([]string{"main.o", "libutil.a", "-o", out}, flags...)...); err != nil {
		t.Fatalf("link: %v\n%s", err, b)
	}
}

// dtltoRun runs a ThinLTO link in dir with thindist as lld's distributor
// and the cache (and records) in cache, args after the driver's LTO
// options; it returns what the link printed.
func dtltoRun(t *testing.T, dir, cache string, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"-flto=thin", "-fuse-ld=lld", "-fthinlto-distributor=" + thindist}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, clang, args...)
	cmd.Dir = dir
	cmd.Env = testEnv(t, "THINDIST_CACHE_DIR="+cache)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// thindistLink links the record program with `thindist link` into out.
func thindistLink(t *testing.T, dir, cache, out string) {
	t.Helper()
	code, text := runThindist(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "link", "--",
		clang, "-flto=thin", "-fuse-ld=lld", "main.o", "libutil.a", "-o", out)
	if code != 0 {
		t.Fatalf("thindist link: exit %d\n%s", code, text)
	}
}

// lastRecord reads the newest record through `thindist report --json`.
func lastRecord(t *testing.T, dir, cache string) *record.Run {
	t.Helper()
	code, out := runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report", "--json")
	if code != 0 {
		t.Fatalf("thindist report --json: exit %d\n%s", code, out)
	}
	var run record.Run
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatalf("thindist report --json is not a record: %v\n%s", err, out)
	}
	return &run
}

// runThindistStdout runs thindist and returns its exit code and standard
// output alone.
func runThindistStdout(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd, cancel := thindistCommand(t, dir, env, args...)
	defer cancel()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func missOf(t *testing.T, run *record.Run, module string) string {
	t.Helper()
	for _, a := range run.Actions {
		if a.Module == module {
			return strings.Join(a.Miss, "; ")
		}
	}
	var names []string
	for _, a := range run.Actions {
		names = append(names, a.Module)
	}
	t.Fatalf("run %s has no module %s: %v", run.ID, module, names)
	return ""
}

// TestRecordMissReasons links, changes one source and links again, then
// changes a flag: each run's record says why each module missed the cache,
// naming the import that changed and then the flag; modules are named as
// the user knows them, never by lld's temporary names.
func TestRecordMissReasons(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	dtltoLink(t, dir, cache, "app")
	run := lastRecord(t, dir, cache)
	if run.Output != "app" || run.Entry != "dtlto" || len(run.Actions) != 2 || !run.LocalCache {
		t.Fatalf("first record: output %q, entry %q, %d actions", run.Output, run.Entry, len(run.Actions))
	}
	// The link as the user ran it: lld's command line, which ran thindist
	// with a job file.
	if len(run.Linker) < 3 || !strings.Contains(filepath.Base(run.Linker[0]), "ld") || !slices.Contains(run.Linker, "libutil.a") {
		t.Errorf("the record's linker command line is %q, not lld's", run.Linker)
	}
	for _, a := range run.Actions {
		if strings.Contains(a.Module, " at ") || a.Key == "" || a.Where != record.WhereLocal || a.End < a.Begin || a.CPU <= 0 {
			t.Errorf("action %+v", a)
		}
	}
	if got := missOf(t, run, "libutil.a(util.o)"); !strings.Contains(got, "first compile") {
		t.Errorf("first link: libutil.a(util.o) missed because %q", got)
	}

	// Relinking the same objects hits the cache: no reasons.
	dtltoLink(t, dir, cache, "app")
	run = lastRecord(t, dir, cache)
	for _, a := range run.Actions {
		if a.Where != record.WhereLocalCache || len(a.Miss) > 0 {
			t.Errorf("relink: %s %s %q", a.Module, a.Where, a.Miss)
		}
	}

	// One source changes: util.o itself, and main.o through its import.
	recordProgram(t, dir, 3)
	dtltoLink(t, dir, cache, "app")
	run = lastRecord(t, dir, cache)
	if got := missOf(t, run, "main.o"); got != "import libutil.a(util.o) changed" {
		t.Errorf("after util.c changed, main.o missed because %q", got)
	}
	if got := missOf(t, run, "libutil.a(util.o)"); got != "the module libutil.a(util.o) itself changed" {
		t.Errorf("after util.c changed, libutil.a(util.o) missed because %q", got)
	}

	// A flag changes.
	dtltoLink(t, dir, cache, "app", "-O3")
	run = lastRecord(t, dir, cache)
	for _, m := range []string{"main.o", "libutil.a(util.o)"} {
		if got := missOf(t, run, m); got != "flag -O3 instead of -O2" {
			t.Errorf("after -O2 became -O3, %s missed because %q", m, got)
		}
	}
	code, text := runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report")
	if code != 0 || !strings.Contains(text, "flag -O3 instead of -O2: ") || !strings.Contains(text, "libutil.a(util.o)") {
		t.Errorf("thindist report (exit %d):\n%s", code, text)
	}
	code, text = runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report", "--list")
	if code != 0 || strings.Count(text, "\n") != 4 {
		t.Errorf("thindist report --list (exit %d), want 4 runs:\n%s", code, text)
	}
	code, text = runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "stats", "--json")
	var st struct {
		Runs  record.Totals `json:"runs"`
		Cache struct{ Hits, Misses int64 }
	}
	if err := json.Unmarshal([]byte(text), &st); code != 0 || err != nil {
		t.Fatalf("thindist stats --json (exit %d): %v\n%s", code, err, text)
	}
	// 8 actions: 2 hits (the relink), 6 compiled.
	if r, c := st.Runs, st.Cache; r.Runs != 4 || c.Hits != 2 || c.Misses != 6 || r.Local != 6 || r.SavedCPU <= 0 {
		t.Errorf("stats %+v, cache %+v", r, c)
	}
	if code, text = runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "stats", "--zero"); code != 0 {
		t.Fatalf("thindist stats --zero: exit %d\n%s", code, text)
	}
	_, text = runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "stats", "--json")
	st.Runs, st.Cache.Hits = record.Totals{}, -1
	if err := json.Unmarshal([]byte(text), &st); err != nil || st.Runs.Runs != 0 || st.Cache.Hits != 0 {
		t.Errorf("after --zero: %v %+v", err, st.Runs)
	}
	if code, text = runThindistStdout(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report", "--list"); strings.Count(text, "\n") != 4 {
		t.Errorf("--zero dropped records:\n%s", text)
	}
}

// TestRecordLinkPhases: `thindist link` records its three phases, the
// output, and the backends between the thin and the final link.
func TestRecordLinkPhases(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	code, out := runThindist(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "link", "--trace=trace-%p.json", "--",
		clang, "-flto=thin", "-fuse-ld=lld", "main.o", "libutil.a", "-o", "app")
	if code != 0 {
		t.Fatalf("thindist link: exit %d\n%s", code, out)
	}
	run := lastRecord(t, dir, cache)

	// The trace is named by the process ID and carries the run's command
	// line and output.
	data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("trace-%d.json", run.PID)))
	if err != nil {
		t.Fatalf("no trace named by the pid: %v", err)
	}
	var tr struct {
		OtherData struct {
			CommandLine []string `json:"command_line"`
			Output      string   `json:"output"`
			Record      string   `json:"record"`
		} `json:"otherData"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	if md := tr.OtherData; len(md.CommandLine) < 3 || md.CommandLine[1] != "link" || md.Record != run.ID || md.Output != "app" {
		t.Errorf("trace metadata %+v", md)
	}
	var names []string
	for i, p := range run.Phases {
		names = append(names, p.Name)
		if p.End.Before(p.Start) || i > 0 && p.Start.Before(run.Phases[i-1].Start) {
			t.Errorf("phase %+v", p)
		}
	}
	if got := strings.Join(names, ", "); got != "reading the link, thin link, planning the backends, backends, final link" {
		t.Errorf("phases %s", got)
	}
	// The phases' details are the summary line's ("backends 1.2s
	// including 300ms starting 1 fork server").
	details := 0
	for _, p := range run.Phases {
		if p.Detail != "" {
			details++
			if !strings.Contains(run.Log, " including "+p.Detail) {
				t.Errorf("phase %s: detail %q, not in the summary:\n%s", p.Name, p.Detail, run.Log)
			}
		}
	}
	if want := strings.Count(run.Log, " including "); details != want {
		t.Errorf("%d phases with details, the summary has %d:\n%s", details, want, run.Log)
	}
	if run.Entry != "link" || run.Output != "app" || len(run.Actions) != 2 || !strings.Contains(run.Log, "2 jobs") {
		t.Errorf("record: entry %q, output %q, %d actions, log %q", run.Entry, run.Output, len(run.Actions), run.Log)
	}
	missOf(t, run, "libutil.a(util.o)")

	// --no-record leaves none.
	if code, out := runThindist(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "link", "--no-record", "--",
		clang, "-flto=thin", "-fuse-ld=lld", "main.o", "libutil.a", "-o", "app"); code != 0 {
		t.Fatalf("thindist link --no-record: exit %d\n%s", code, out)
	}
	if es, err := record.Open(cache).List(); err != nil || len(es) != 1 {
		t.Errorf("after a link with --no-record: %d records (%v), want the first one alone", len(es), err)
	}
}

// TestRecordConcurrentLinks runs 8 links at once sharing one cache
// directory: all 8 are recorded, each whole, and the totals count them all.
func TestRecordConcurrentLinks(t *testing.T) {
	t.Parallel()
	needClang(t)
	dir, cache := t.TempDir(), t.TempDir()
	recordProgram(t, dir, 2)
	const n = 8
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dtltoLink(t, dir, cache, fmt.Sprintf("app%d", i))
		}()
	}
	wg.Wait()
	store := record.Open(cache)
	es, err := store.List()
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]bool{}
	for _, e := range es {
		run, err := record.ReadFile(e.Path)
		if err != nil {
			t.Errorf("record %s: %v", e.ID, err)
			continue
		}
		if len(run.Actions) != 2 {
			t.Errorf("record %s has %d actions", e.ID, len(run.Actions))
		}
		outputs[run.Output] = true
	}
	if len(es) != n || len(outputs) != n {
		t.Errorf("%d records of %d outputs, want %d of each: %v", len(es), len(outputs), n, outputs)
	}
	if tot, err := store.Totals(); err != nil || tot.Runs != n || tot.Actions != 2*n {
		t.Errorf("totals %+v, %v", tot, err)
	}
}

// TestReportDefaultsToHere: `thindist report` with no argument shows the
// last link under the current directory, not another build's newer one;
// outside every build it shows the newest and says so.
func TestReportDefaultsToHere(t *testing.T) {
	t.Parallel()
	needClang(t)
	cache := t.TempDir()
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	recordProgram(t, a, 2)
	recordProgram(t, b, 3)
	thindistLink(t, a, cache, "app-a")
	thindistLink(t, b, cache, "app-b") // the newest
	report := func(dir string) (*record.Run, string) {
		t.Helper()
		cmd, cancel := thindistCommand(t, dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report", "--json")
		defer cancel()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var run record.Run
		if err != nil || json.Unmarshal(out, &run) != nil {
			t.Fatalf("thindist report --json in %s: %v\n%s%s", dir, err, out, stderr.String())
		}
		return &run, stderr.String()
	}
	for _, dir := range []string{a, filepath.Dir(a)} { // a's, and the directory a is in
		run, note := report(dir)
		if run.Output != filepath.Join(a, "app-a") && run.Output != "app-a" || note != "" {
			t.Errorf("report in %s shows the run of %s (%q), want %s's, without a note", dir, run.Output, note, a)
		}
	}
	if run, _ := report(b); !strings.HasSuffix(run.Output, "app-b") {
		t.Errorf("report in %s shows the run of %s", b, run.Output)
	}
	run, note := report(t.TempDir())
	if !strings.HasSuffix(run.Output, "app-b") || !strings.Contains(note, "no recorded run linked under") || !strings.Contains(note, "showing the newest") {
		t.Errorf("report elsewhere shows the run of %s with the note %q, want the newest, app-b, with a note", run.Output, note)
	}
}

// TestReportHTMLInChromium opens `thindist report --html` in a real
// headless Chromium with the network off: the page loads from the file,
// shows a timeline bar and a table row for every module, and sorts; its
// screenshot is kept as the test's artifact. Without Chromium the test is
// skipped, except under CI.
func TestReportHTMLInChromium(t *testing.T) {
	t.Parallel()
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and Chromium is not installed at %s", chromium)
		}
		t.Skipf("Chromium is not installed at %s (apt-get install chromium)", chromium)
	}
	p := program(t, testprog.Options{Modules: 12, Seed: 5, ArchiveModules: 3})
	cache := t.TempDir()
	// A linker command of 240 lines' worth of arguments, as a large
	// build's can be: it must not push the timeline off the first screen.
	var long []string
	for i := range 240 {
		long = append(long, fmt.Sprintf("-Wl,-rpath,/opt/a/rather/long/library/directory/number/%03d/lib", i))
	}
	l := linkCmd{p: p, objs: p.Objects, out: "prog", dist: thindist, distArgs: []string{"--jobs=2"},
		flags: long, env: []string{"THINDIST_CACHE_DIR=" + cache}}
	l.mustLink(t)
	run := lastRecord(t, p.Dir, cache)
	if len(run.Actions) != 12 {
		t.Fatalf("%d actions recorded, want 12", len(run.Actions))
	}
	art := t.ArtifactDir()
	page := filepath.Join(art, "report.html")
	if code, out := runThindist(t, p.Dir, []string{"THINDIST_CACHE_DIR=" + cache}, "report", "--html", page); code != 0 {
		t.Fatalf("thindist report --html: exit %d\n%s", code, out)
	}
	html, _ := os.ReadFile(page)
	for _, ref := range []string{"http://", "https://", "src=", "<link"} {
		if strings.Contains(strings.ReplaceAll(string(html), `xmlns="http://www.w3.org/2000/svg"`, ""), ref) {
			t.Errorf("the page refers to something outside itself (%q)", ref)
		}
	}

	// Chromium in a network namespace of its own: no network at all.
	netOff := []string{"unshare", "-n", "--"}
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot run Chromium without a network (unshare -n: %v)", err)
		}
		t.Logf("unshare -n is not permitted (%v): Chromium runs with the network available", err)
		netOff = nil
	}
	chrome := func(args ...string) string {
		t.Helper()
		argv := append(netOff, chromium, "--headless", "--no-sandbox", "--disable-gpu",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
			"--user-data-dir="+t.TempDir(), "--window-size=1400,1000", "--virtual-time-budget=2000")
		argv = append(argv, args...)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	dom := chrome("--dump-dom", "file://"+page)
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Errorf("the page's script did not run")
	}
	// Where the timeline lands, measured in a copy of the page by a script
	// of the test's own.
	measured := filepath.Join(art, "measured.html")
	probe := `<script>document.body.setAttribute("data-timeline-top", Math.round(document.getElementById("timeline").getBoundingClientRect().top))</script></body>`
	if err := os.WriteFile(measured, []byte(strings.Replace(string(html), "</body>", probe, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`data-timeline-top="(-?\d+)"`).FindStringSubmatch(chrome("--dump-dom", "file://"+measured)); m == nil {
		t.Errorf("the timeline's position was not measured")
	} else if top, _ := strconv.Atoi(m[1]); top <= 0 || top > 600 {
		t.Errorf("the timeline starts %dpx down the page, want it within the first screen (a 1000px window), above 600px", top)
	} else {
		t.Logf("the timeline starts %dpx down the page", top)
	}
	if !strings.Contains(dom, `<details class="cmd">`) {
		t.Errorf("the long linker command is not folded")
	}
	// Bars wide enough for their module's name are labelled with it.
	labels := 0
	for _, a := range run.Actions {
		esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(a.Module)
		if strings.Contains(dom, `dy="13">`+esc+`</text>`) {
			labels++
		}
	}
	if labels == 0 {
		t.Errorf("no timeline bar is labelled with its module")
	}
	for _, a := range run.Actions {
		esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(a.Module)
		if !strings.Contains(dom, "<td>"+esc+"</td>") {
			t.Errorf("no table row for module %s", a.Module)
		}
		if !strings.Contains(dom, `data-module="`+esc+`"`) {
			t.Errorf("no timeline bar for module %s", a.Module)
		}
	}
	if n := strings.Count(dom, `<tr class="module`); n != len(run.Actions) {
		t.Errorf("%d table rows, want %d", n, len(run.Actions))
	}
	shot := filepath.Join(art, "report.png")
	chrome("--screenshot="+shot, "file://"+page)
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("no screenshot: %v", err)
	}
	t.Logf("screenshot of the report page: %s (kept with go test -artifacts)", shot)
}
