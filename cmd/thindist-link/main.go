// Command thindist-link is `thindist link` for builds of many small links:
// it takes the same arguments, becomes lld at once for a link thindist
// leaves to lld, and `thindist link` for any other (linkcmd.Front).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/thindist/thindist/internal/linkcmd"
	"github.com/thindist/thindist/internal/thinlink"
)

func main() {
	self, _ := os.Executable()
	err := linkcmd.Front(context.Background(), os.Args[1:], linkcmd.FrontEnv{
		Getenv:  os.Getenv,
		Stderr:  os.Stderr,
		Replace: linkcmd.Replace,
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
