package forkserver

import (
	"debug/elf"
	"slices"
	"strings"
)

// llvmLayers are the layers of an LLVM target that clang registers at start
// (cc1_main and the driver call InitializeAllTargets, TargetMCs,
// AsmPrinters and AsmParsers), in the order it registers them.
var llvmLayers = []string{"TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"}

// initialisers lists the LLVM target initialisers that the executable at
// path imports (LLVMInitializeX86Target, ...), layer by layer as clang calls
// them, for the shim to call once in the server (see preinit in shim.c).
// What the executable does not import is never called: a compiler that is
// not linked against a shared libLLVM (gcc, a static clang) gets an empty
// list and a server that does nothing more than before.
func initialisers(path string) []string {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		return nil
	}
	byLayer := make([][]string, len(llvmLayers))
	for _, s := range syms {
		target, ok := strings.CutPrefix(s.Name, "LLVMInitialize")
		if !ok {
			continue
		}
		// No two layers' names end alike, and a target's name is never
		// empty (LLVMInitializeTarget is another function, with an
		// argument).
		for i, layer := range llvmLayers {
			if t, ok := strings.CutSuffix(target, layer); ok && t != "" {
				byLayer[i] = append(byLayer[i], s.Name)
			}
		}
	}
	var names []string
	for _, l := range byLayer {
		slices.Sort(l)
		names = append(names, l...)
	}
	return names
}
