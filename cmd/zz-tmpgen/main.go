package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/thindist/thindist/internal/testprog"
)

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	arch, _ := strconv.Atoi(os.Args[3])
	p, err := testprog.Generate(os.Args[1], testprog.Options{Modules: n, Seed: 7, ArchiveModules: arch, ThinArchiveModules: arch / 2})
	if err != nil {
		panic(err)
	}
	if err := p.Compile(context.Background(), "/usr/lib/llvm-22/bin/clang"); err != nil {
		panic(err)
	}
	for _, o := range p.Objects {
		fmt.Println(o)
	}
}
