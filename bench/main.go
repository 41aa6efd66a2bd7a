// Command bench measures thindist against the alternatives on the same
// objects, in one run: lld's in-process ThinLTO (--thinlto-jobs=N), a serial
// distributor equivalent to LLVM's reference llvm/utils/dtlto/local.py
// (serial_dist.py here, run by python3 as lld would run local.py), and
// thindist as lld's DTLTO distributor. For every project it prints the median
// link times, their ratios and the exec limit of a distributed link:
//
//	thin link + max(largest backend, Σ backends / cores) + final link
//
// with each part measured on its own (--thinlto-index-only for the thin link,
// each backend timed while running alone, the final link of the native
// objects). It also measures `thindist link` (the separate thin-link flow)
// on the same objects; the cache (issue 3: cold link, warm relink, relink
// after one source change, against lld's --thinlto-cache-dir); remote
// execution against the in-repo REAPI test double on loopback (issue 4). And
// it measures thindist's own cost: CPU time per job and peak
// RSS on a synthetic job file of 10,000 jobs whose compiler does nothing but
// write a minimal ELF object.
//
//	go run ./bench -project lua -project gen500 -runs 5 -results bench/RESULTS.md
//
// Projects: "lua" is Debian's lua5.4 (scripts/debsrc.sh lua5.4 must have run;
// see internal/testsupport/realproj), "7zip" 7-Zip's C++ console program with debug info
// (311 modules; scripts/debsrc.sh p7zip), "genN" a synthetic program of N
// modules from internal/testsupport/testprog. This is a benchmark, not a test: `go test
// ./...` does not run it.
//
// -parts cluster (not in the default set) measures thindist on a SIMULATED
// cluster (issue 10; cluster.go): W worker slots replaying recorded
// results, with a round-trip time and a bandwidth limit, against the ideal
// link and in-process ThinLTO:
//
//	go run ./bench -parts cluster -project lua -project 7zip -project gen500 -project gen5000 -results bench/RESULTS.md
//
// -parts hits (not in the default set) measures a fully cached relink
// against lld in-process with its own warm cache (issue 50; hits.go), in
// CPU time per backend, with a profile of thindist and strace counts of
// both with -hits-profile:
//
//	go run ./bench -parts hits -project gen400 -runs 5 -hits-profile /tmp/hits
//
// -parts vmlinux (not in the default set either) times Kbuild's own
// vmlinux.o link of a built ThinLTO kernel tree (vmlinux.go), in-process
// and through `thindist link`, in pairs:
//
//	go run ./bench -parts vmlinux -kernel SCRATCH/build-thin -runs 9 -results bench/RESULTS.md
//
// -parts concurrent (not in the default set) runs one, two and eight
// `thindist link`s of a project at once on a fresh cache, sharing it and
// with a cache each, and counts the backend compiles (concurrent.go):
//
//	go run ./bench -parts concurrent -project gen500 -project lua -results bench/RESULTS.md
//
// -parts toolchain (not in the default set; needs root for the chrooted
// workers) compares the compiler shipped as inputs with the workers'
// installed one on two REAPI test doubles (toolchain.go): the first link's
// toolchain uploads against the tree's zstd size, then warm links in
// alternating pairs:
//
//	go run ./bench -parts toolchain -project lua -runs 3 -results bench/RESULTS.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/thindist/thindist/bench/internal/floor"
	"github.com/thindist/thindist/bench/internal/server"
)

type projectList []string

func (p *projectList) String() string     { return strings.Join(*p, ",") }
func (p *projectList) Set(s string) error { *p = append(*p, s); return nil }

type options struct {
	projects     projectList
	runs         int
	jobs         int
	work         string
	keep         bool
	overheadJobs int
	overheadRuns int
	results      string
	python       string

	maxBusy         float64
	settle          time.Duration
	maxInterference float64
	retries         int
	pprof           string

	parts      string
	kernel     string
	remoteJobs int
	remoteRuns int

	clusterWorkers    string
	clusterRTTs       string
	clusterGbits      string
	clusterSlow       float64
	clusterRuns       int
	clusterTraces     bool
	clusterVsLocal    int
	clusterVsLocalMax time.Duration
	clusterPprof      string
	clusterRecordings string
	clusterGroup      int
	// The compression sweep behind a relay (cluster_compress.go).
	clusterCompress        string
	clusterMbits           string
	clusterRelayRTT        time.Duration
	clusterCompressWorkers int
	clusterBackend         string
	clusterBackendReset    string
	clusterBackendFlags    string

	hitsProfile string
}

func (o *options) part(name string) bool {
	for _, p := range strings.Split(o.parts, ",") {
		if strings.TrimSpace(p) == name {
			return true
		}
	}
	return false
}

// register defines the benchmark's flags on fs, each setting its field of
// o (its default until fs is parsed).
func (o *options) register(fs *flag.FlagSet) {
	fs.Var(&o.projects, "project", "project to link: lua or genN (N modules); repeatable (default lua and gen500)")
	fs.IntVar(&o.runs, "runs", 5, "timed links per project and method (the median is reported)")
	fs.IntVar(&o.jobs, "jobs", runtime.NumCPU(), "parallelism N for in-process ThinLTO and thindist")
	fs.StringVar(&o.work, "work", "", "work directory (default: a new temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory")
	fs.IntVar(&o.overheadJobs, "overhead-jobs", 10000, "jobs in the distributor-overhead job file (0: skip)")
	fs.IntVar(&o.overheadRuns, "overhead-runs", 3, "runs of the overhead measurement")
	fs.StringVar(&o.results, "results", "", "write the figures into this markdown file, between the bench markers: each part measured replaces its own figures, the others' stay")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "python3 that runs the serial distributor")
	fs.Float64Var(&o.maxBusy, "quiet", 0.15, "before each timed command, wait until the machine is at most this busy (0–1)")
	fs.DurationVar(&o.settle, "settle", 2*time.Minute, "wait at most this long for a quiet machine")
	fs.Float64Var(&o.maxInterference, "max-interference", 0.10,
		"repeat a run during which other processes used more than this share of the machine")
	fs.IntVar(&o.retries, "retries", 3, "repeat a disturbed run at most this many times")
	fs.StringVar(&o.pprof, "pprof", "", "instead of benchmarking, profile thindist's code on the no-op job file into this CPU profile")
	fs.StringVar(&o.parts, "parts", "links,cache,remote,overhead,history,worker,small",
		"what to measure, comma-separated: links (the methods compared, exec limit, thindist link), cache (issue 3), remote (issue 4), overhead, history (issue 12: scheduling from recorded times), worker (issue 32: the runners side by side, with a per-user server cold and warm), "+
			"hits (issue 50: a fully cached relink against lld's warm --thinlto-cache-dir, CPU per backend; not in the default set), "+
			"small (issue 34: -r links of a project's smallest modules, in-process, left to lld and distributed), "+
			"concurrent (issue 48: one, two and eight links of a project at once on a fresh cache, not in the default set), "+
			"toolchain (issue 49: the compiler shipped as inputs to chrooted workers vs installed, first link's uploads and warm links; needs root; not in the default set), "+
			"vmlinux (issue 32: Kbuild's vmlinux.o link of the -kernel tree, not in the default set), "+
			"cluster (issue 10: a SIMULATED cluster, not in the default set)")
	fs.StringVar(&o.kernel, "kernel", "", "the vmlinux part's kernel tree: one built with LLVM=1 and CONFIG_LTO_CLANG_THIN, its vmlinux.o linked (as scripts/kernel-bench.sh leaves DIR/build-thin)")
	fs.IntVar(&o.remoteJobs, "remote-jobs", 50, "thindist --remote-jobs in the remote measurement")
	fs.IntVar(&o.remoteRuns, "remote-runs", 3, "repetitions of the remote measurement (each with a fresh server)")
	fs.StringVar(&o.clusterWorkers, "cluster-workers", "16,64,256", "cluster simulation: the simulated worker slots W, comma-separated")
	fs.StringVar(&o.clusterRTTs, "cluster-rtt", "0.2ms,5ms,25ms", "cluster simulation: the simulated round-trip times, comma-separated")
	fs.StringVar(&o.clusterGbits, "cluster-gbits", "10,1", "cluster simulation: the simulated link's bandwidth in Gbit/s, comma-separated")
	fs.Float64Var(&o.clusterSlow, "cluster-slow", 10,
		"cluster simulation: also run the middle of the grid with one worker slot this many times slower for the longest action (≤ 1: not)")
	fs.StringVar(&o.hitsProfile, "hits-profile", "", "hits part: also profile one relink's thindist into `DIR`/PROJECT.pprof and count each kind's syscalls with strace -f -c")
	fs.IntVar(&o.clusterGroup, "cluster-group", 0,
		"cluster simulation: also run every plain grid point with thindist --remote-group=N (grouping small backends; ≤ 1: not)")
	fs.StringVar(&o.clusterCompress, "cluster-compress", "",
		"cluster simulation: also link behind a relay (bench/relay.go: -cluster-relay-rtt, -cluster-mbits) with each of these "+
			"--remote-compress settings, comma-separated (e.g. downloads,all,none,auto; auto twice: measuring, then recalling); \"\": not")
	fs.StringVar(&o.clusterMbits, "cluster-mbits", "50,100,1000", "cluster simulation: the relay's bandwidth each way in Mbit/s for -cluster-compress, comma-separated")
	fs.DurationVar(&o.clusterRelayRTT, "cluster-relay-rtt", 25*time.Millisecond, "cluster simulation: the relay's round trip for -cluster-compress")
	fs.IntVar(&o.clusterCompressWorkers, "cluster-compress-workers", 64, "cluster simulation: the simulated worker slots for -cluster-compress")
	fs.StringVar(&o.clusterBackend, "cluster-backend", "",
		"cluster simulation: -cluster-compress's links reach this REAL REAPI endpoint (`HOST:PORT`, plain gRPC) through the relay instead of the simulation; "+
			"its workers must replay the project's recording (bench/replayworker, -cluster-recordings) and -cluster-compress-workers should be their slots")
	fs.StringVar(&o.clusterBackendReset, "cluster-backend-reset", "",
		"cluster simulation: with -cluster-backend, a shell command run before each link that empties the endpoint's CAS and action cache (every link is a cold one)")
	fs.StringVar(&o.clusterBackendFlags, "cluster-backend-flags", "",
		"cluster simulation: with -cluster-backend, more thindist flags for its links, space-separated (e.g. --remote-platform=OSFamily=Linux)")
	fs.BoolVar(&o.clusterTraces, "cluster-traces", false,
		"cluster simulation: have thindist write a Chrome trace (--trace) of every replay link, and keep them; "+
			"what writing it costs then counts in thindist's CPU, which otherwise is that of its defaults")
	fs.IntVar(&o.clusterRuns, "cluster-runs", 1, "cluster simulation: links per grid point (the median is reported)")
	fs.IntVar(&o.clusterVsLocal, "cluster-vs-local", 3,
		"cluster simulation: also compare a cold remote link on a one-slot and on a slow cluster with thindist on this machine alone, "+
			"this many links of each, interleaved (0: not)")
	fs.DurationVar(&o.clusterVsLocalMax, "cluster-vs-local-max", 2*time.Minute,
		"cluster simulation: leave that comparison out for a project whose recorded backends take longer than this on this machine's cores (Σ / -jobs)")
	fs.StringVar(&o.clusterPprof, "cluster-pprof", "", "cluster simulation: after the grid, profile thindist's CPU in one more link per project into `DIR`/PROJECT.pprof")
	fs.StringVar(&o.clusterRecordings, "cluster-recordings", "",
		"cluster simulation: keep each project's recording in `DIR` and reuse the one a run before kept there (same objects; "+
			"the recording is keyed by the actions' contents, not by thindist's version)")
}

func main() {
	var o options
	o.register(flag.CommandLine)
	serve := flag.String("serve-reapitest", "", "internal: run the REAPI test double for the remote part, executing in `DIR`")
	simulate := flag.String("simulate", "", "internal: with -serve-reapitest, the cluster simulation's configuration (JSON)")
	chroot := flag.Bool("serve-chroot", false, "internal: with -serve-reapitest, run each command chrooted into its input root")
	floorClient := flag.String("rpc-floor-client", "", "internal: be the transport floor's client (bench/internal/floor) of the REAPI test double at `ADDR`")
	distPprof := flag.String("distributor-pprof", "", "internal: act as lld's distributor (thindist's code) under the CPU profiler, writing `FILE`; thindist's arguments follow --")
	flag.Parse()
	if *distPprof != "" {
		os.Exit(distributorProfiled(context.Background(), *distPprof, flag.Args()))
	}
	if *floorClient != "" {
		if err := floor.Client(*floorClient); err != nil {
			fmt.Fprintf(os.Stderr, "bench: the floor's client: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *serve != "" {
		if err := server.Serve(*serve, *simulate, *chroot); err != nil {
			fmt.Fprintf(os.Stderr, "bench: REAPI test double: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if len(o.projects) == 0 {
		o.projects = projectList{"lua", "gen500"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, &o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o *options) error {
	if o.part("vmlinux") && o.kernel == "" {
		return fmt.Errorf("the vmlinux part needs a kernel tree: -kernel DIR")
	}
	if o.work == "" {
		d, err := os.MkdirTemp("", "thindist-bench-")
		if err != nil {
			return err
		}
		o.work = d
	}
	if !o.keep {
		defer os.RemoveAll(o.work)
	} else {
		fmt.Fprintf(os.Stderr, "bench: work directory %s\n", o.work)
	}
	tools, err := setupTools(ctx, o)
	if err != nil {
		return err
	}
	if o.pprof != "" {
		if o.pprof, err = filepath.Abs(o.pprof); err != nil {
			return err
		}
		return profileOverhead(ctx, tools, o, filepath.Join(o.work, "profile"))
	}
	fs := describeFS(o.work)
	if strings.Contains(fs, noJournal) {
		fmt.Fprintf(os.Stderr, "bench: warning: the work directory %s\n", fs)
	}
	rep := &report{machine: append(describeMachine(tools), "work directory: "+fs), when: time.Now().UTC(), runs: o.runs, jobs: o.jobs}
	for _, name := range o.projects {
		if !o.part("links") && !o.part("cache") && !o.part("remote") && !o.part("cluster") && !o.part("worker") && !o.part("small") && !o.part("concurrent") && !o.part("toolchain") {
			break // no part measures the projects: do not build them
		}
		p, err := setupProject(ctx, tools, filepath.Join(o.work, name), name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res := &projectResult{p: p, jobs: o.jobs}
		if o.part("links") {
			if res, err = benchProject(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			fmt.Print(res.text())
		}
		if o.part("cache") {
			if res.cache, err = benchCache(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: cache: %w", name, err)
			}
			fmt.Print(res.cacheText(o.jobs))
		}
		if o.part("cluster") {
			if res.cluster, err = benchCluster(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: cluster simulation: %w", name, err)
			}
		}
		if o.part("remote") {
			if res.remote, err = benchRemote(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: remote: %w", name, err)
			}
			fmt.Print(res.remoteText())
		}
		if o.part("worker") {
			if res.worker, err = benchWorker(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: worker: %w", name, err)
			}
			fmt.Print(res.worker.text(p.name))
		}
		if o.part("small") {
			if res.small, err = benchSmall(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: small links: %w", name, err)
			}
			fmt.Print(res.small.text(p.name))
		}
		if o.part("concurrent") {
			if res.concurrent, err = benchConcurrent(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: concurrent links: %w", name, err)
			}
			fmt.Print(res.concurrent.text(p.name))
		}
		if o.part("toolchain") {
			if res.toolchain, err = benchToolchain(ctx, tools, o, p); err != nil {
				return fmt.Errorf("%s: toolchain: %w", name, err)
			}
			fmt.Print(res.toolchain.text(p.name))
		}
		rep.projects = append(rep.projects, res)
	}
	if o.part("hits") {
		if err := runHits(ctx, tools, o); err != nil {
			return err
		}
	}
	if o.part("cluster") {
		f, err := floor.Measure(ctx, filepath.Join(o.work, "floor"))
		if err != nil {
			return fmt.Errorf("the transport's floor: %w", err)
		}
		rep.floor = f
		fmt.Fprintf(os.Stderr, "bench: the transport's floor: %s\n", f.Text())
	}
	if o.overheadJobs > 0 && o.part("overhead") {
		ov, err := measureOverhead(ctx, tools, o, filepath.Join(o.work, "overhead"), o.overheadJobs, o.jobs, o.overheadRuns)
		if err != nil {
			return fmt.Errorf("overhead: %w", err)
		}
		rep.overhead = ov
		fmt.Print(ov.text())
	}
	if o.part("history") {
		h, err := benchHistory(ctx, tools, o)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		rep.history = h
		fmt.Print(h.text())
	}
	if o.part("vmlinux") {
		v, err := benchVmlinux(ctx, tools, o)
		if err != nil {
			return fmt.Errorf("vmlinux: %w", err)
		}
		rep.vmlinux = v
		fmt.Print(v.text())
	}
	if o.results != "" {
		if err := rep.writeMarkdown(o.results); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", o.results)
	}
	return nil
}
