package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// TestMain lets this test binary stand for the benchmark's own binary when
// the remote part starts its server process (server.Start runs the
// running executable with -serve-reapitest).
func TestMain(m *testing.M) {
	for _, a := range os.Args[1:] {
		if a == "-serve-reapitest" || a == "-rpc-floor-client" {
			main()
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// TestRemoteBench runs the benchmark's remote part on a generated program,
// as `go run ./bench -parts remote -project gen200` does: a cold remote
// link against the REAPI test double on loopback, then warm relinks from
// another directory, with bytes uploaded per distinct byte and round trips
// per action. It is a measurement, not a check (THINDIST_BENCH=1 runs it;
// THINDIST_BENCH_FLAGS adds bench flags, e.g. "-project gen1000
// -remote-jobs 20 -remote-runs 1"); it prints what the benchmark prints.
func TestRemoteBench(t *testing.T) {
	if os.Getenv("THINDIST_BENCH") == "" {
		t.Skip("set THINDIST_BENCH=1")
	}
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.register(fs)
	args := append([]string{"-parts", "remote", "-remote-runs", "1"}, strings.Fields(os.Getenv("THINDIST_BENCH_FLAGS"))...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if len(o.projects) == 0 {
		o.projects = projectList{"gen200"}
	}
	if err := run(t.Context(), &o); err != nil {
		t.Fatal(err)
	}
}
