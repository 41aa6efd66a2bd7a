// Command plugin is libDTLTOthindist.so, thindist as a DTLTO distribution
// plugin: a linker built with the plugin design of Distributed ThinLTO loads
// it for --thinlto-distribute=thindist and calls dtltoPerformCodegen with
// every backend compilation of the link. Build it with
//
//	go build -buildmode=c-shared -o libDTLTOthindist.so ./plugin
//
// and see README.md and dtlto_plugin.h for the interface.
package main

/*
#define DTLTO_PLUGIN_NO_PROTOTYPE
#include "dtlto_plugin.h"
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/thindist/thindist/internal/observe/report"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/sys/jobserver"
	"github.com/thindist/thindist/internal/sys/procstart"
)

// inherited is the linker's jobserver from make, checked once for the
// process: a link may call the plugin more than once, and the client owns
// the descriptors (a second *os.File for them would close them when
// collected). The linker has opened files of its own before loading the
// plugin, so this relies on the checks of jobserver.Inherit alone.
var inherited = sync.OnceValue(func() jobserver.Inherited {
	return jobserver.Inherit(os.Getenv("MAKEFLAGS"))
})

// dtltoPerformCodegen is the plugin's entry point (see dtlto_plugin.h). It
// returns 0 when every node's object is in place and valid, 1 otherwise.
//
//export dtltoPerformCodegen
func dtltoPerformCodegen(cfg *C.dtltoConfigTy, nodesNum C.size_t, nodes **C.dtltoBitcodeNodeTy,
	argc C.size_t, argv **C.char) (ret C.int) {
	em := emitter{cfg: cfg}
	// A Go panic must not unwind into the linker: report it and fail. A
	// fault on a garbage pointer from the linker becomes a panic too.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			em.emit(false, fmt.Sprintf("thindist: internal error (panic): %v\n%s", p, debug.Stack()))
			ret = 1
		}
	}()
	if cfg == nil {
		em.emit(false, "thindist: dtltoPerformCodegen was called with a NULL configuration")
		return 1
	}
	return C.int(perform(em, nodesNum, nodes, argc, argv))
}

func perform(em emitter, nodesNum C.size_t, cnodes **C.dtltoBitcodeNodeTy, argc C.size_t, cargv **C.char) int {
	start := time.Now() // the run's wall time counts from here
	fail := func(err error) int {
		em.emit(false, "thindist: "+err.Error())
		return 1
	}
	argv, err := readArgv(argc, cargv)
	if err != nil {
		return fail(err)
	}
	nodes, err := readNodes(nodesNum, cnodes)
	if err != nil {
		return fail(err)
	}
	if len(nodes) == 0 {
		return 0
	}
	linker, _ := os.Executable()
	s, err := parseArgv(argv, os.Getenv, linker)
	if err != nil {
		return fail(err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	actions, err := buildActions(dir, s, nodes)
	if err != nil {
		return fail(err)
	}

	// Diagnostics arrive from the scheduler's goroutines; they reach the
	// linker's callbacks from this goroutine, i.e. on the linker's thread.
	var (
		mu    sync.Mutex
		diags []pipeline.Diagnostic
	)
	env := pipeline.Env{
		Stderr:    os.Stderr,
		Terminal:  report.IsTerminal(os.Stderr),
		Getenv:    os.Getenv,
		Jobserver: inherited(),
		Diag: func(d pipeline.Diagnostic) {
			mu.Lock()
			diags = append(diags, d)
			mu.Unlock()
		},
	}
	// The run is recorded and summed up as the other entry points' are;
	// its command line is the linker's.
	sess := pipeline.NewSession("plugin", os.Args, env, start)
	sess.QuietJobserver(&s.cfg)
	// The linker's work before it called the plugin (reading the inputs,
	// the thin link) is part of where the link's time went.
	if began, err := procstart.Of(os.Getpid()); err == nil {
		sess.LinkerBegan(began, nil)
	}
	sess.SetOutput(linkerOutput(os.Args))
	runErr := sess.Run(context.Background(), &s.cfg, actions)
	sess.Finish(&s.cfg, runErr)
	mu.Lock()
	defer mu.Unlock()
	failed := false
	for _, d := range diags {
		em.emit(d.Warning, "thindist: "+d.Msg)
		failed = failed || !d.Warning
	}
	if runErr != nil {
		if !failed {
			em.emit(false, "thindist: "+runErr.Error())
		}
		return 1
	}
	return 0
}

func main() {}
