package main

/*
#define DTLTO_PLUGIN_NO_PROTOTYPE
#include <stdlib.h>
#include "dtlto_plugin.h"

// Go cannot call a C function pointer directly.
static void thindist_emit(dtltoEmitDiagTy f, const dtltoDiagContextTy *ctx,
                          const char *msg) {
  f(ctx, msg);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"unsafe"
)

// maxCount bounds the counts the linker passes, so that a garbage count is
// reported instead of walking off into memory.
const maxCount = 1 << 24

// emitter passes diagnostics to the linker's callbacks, or to stderr when
// the linker gave none.
type emitter struct {
	cfg *C.dtltoConfigTy
}

func (e emitter) emit(warning bool, msg string) {
	var f C.dtltoEmitDiagTy
	var ctx *C.dtltoDiagContextTy
	if e.cfg != nil {
		ctx = e.cfg.DiagContext
		if warning {
			f = e.cfg.EmitWarn
		} else {
			f = e.cfg.EmitError
		}
	}
	if f == nil {
		kind := "error"
		if warning {
			kind = "warning"
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", kind, msg)
		return
	}
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.thindist_emit(f, ctx, cs)
}

// goString copies a C string; NULL is "".
func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// readArgv copies Argv.
func readArgv(argc C.size_t, argv **C.char) ([]string, error) {
	if argc == 0 {
		return nil, nil
	}
	if argv == nil {
		return nil, fmt.Errorf("Argc is %d but Argv is NULL", uint64(argc))
	}
	if argc > maxCount {
		return nil, fmt.Errorf("Argc is %d, which cannot be right", uint64(argc))
	}
	out := make([]string, 0, int(argc))
	for i, p := range unsafe.Slice(argv, int(argc)) {
		if p == nil {
			return nil, fmt.Errorf("Argv[%d] is NULL", i)
		}
		out = append(out, C.GoString(p))
	}
	return out, nil
}

// readNodes copies the node array into Go memory, checking every pointer
// the linker should have set.
func readNodes(num C.size_t, nodes **C.dtltoBitcodeNodeTy) ([]node, error) {
	if num == 0 {
		return nil, nil
	}
	if nodes == nil {
		return nil, fmt.Errorf("NodesNum is %d but BitcodeNodes is NULL", uint64(num))
	}
	if num > maxCount {
		return nil, fmt.Errorf("NodesNum is %d, which cannot be right", uint64(num))
	}
	out := make([]node, 0, int(num))
	for i, p := range unsafe.Slice(nodes, int(num)) {
		if p == nil {
			return nil, fmt.Errorf("BitcodeNodes[%d] is NULL", i)
		}
		n := node{
			ModuleID:         goString(p.ModuleId),
			ModulePath:       goString(p.ModulePath),
			ModuleSize:       int64(p.ModuleSize),
			SummaryIndexPath: goString(p.SummaryIndexPath),
			NativeObjectPath: goString(p.NativeObjectPath),
			TargetTriple:     goString(p.TargetTriple),
			TaskNumber:       uint64(p.TaskNumber),
		}
		label := fmt.Sprintf("BitcodeNodes[%d]", i)
		if n.ModuleID != "" {
			label += " (" + n.ModuleID + ")"
		}
		if k := p.ImportsListSize; k > 0 {
			if p.ImportsList == nil {
				return nil, fmt.Errorf("%s: ImportsListSize is %d but ImportsList is NULL", label, uint64(k))
			}
			if k > maxCount {
				return nil, fmt.Errorf("%s: ImportsListSize is %d, which cannot be right", label, uint64(k))
			}
			for j, q := range unsafe.Slice(p.ImportsList, int(k)) {
				if q == nil {
					return nil, fmt.Errorf("%s: ImportsList[%d] is NULL", label, j)
				}
				n.Imports = append(n.Imports, C.GoString(q))
			}
		}
		for _, f := range []struct{ name, v string }{
			{"ModuleId", n.ModuleID}, {"SummaryIndexPath", n.SummaryIndexPath}, {"NativeObjectPath", n.NativeObjectPath},
		} {
			if f.v == "" {
				return nil, errors.New(label + ": " + f.name + " is NULL or empty")
			}
		}
		out = append(out, n)
	}
	return out, nil
}
