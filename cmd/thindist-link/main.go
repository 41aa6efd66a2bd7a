// Command thindist-link is `thindist link` for builds of many small links:
// it takes the same arguments, becomes lld at once for a link thindist
// leaves to lld, and `thindist link` for any other (linkflags.Front).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/thindist/thindist/internal/source/linkflags"
	"github.com/thindist/thindist/internal/source/thinlink"
	"github.com/thindist/thindist/internal/sys/version"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println("thindist-link " + version.Short() + " (the front of thindist link)")
		return
	}
	self, _ := os.Executable()
	err := linkflags.Front(context.Background(), os.Args[1:], linkflags.FrontEnv{
		Getenv:  os.Getenv,
		Stderr:  os.Stderr,
		Replace: linkflags.Replace,
		Self:    self,
	})
	var te *thinlink.Error
	if errors.As(err, &te) {
		fmt.Fprintf(os.Stderr, "thindist-link: error in %v\n", te)
	} else {
		fmt.Fprintf(os.Stderr, "thindist-link: %v\n", err)
	}
	os.Exit(1)
}
