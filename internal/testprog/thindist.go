package testprog

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildThindist builds cmd/thindist into dir and returns the binary's path,
// for tests that run thindist as lld runs it: as a separate program.
func BuildThindist(dir string) (string, error) {
	exe := filepath.Join(dir, "thindist")
	cmd := exec.Command("go", "build", "-o", exe, "github.com/thindist/thindist/cmd/thindist")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building thindist: %v\n%s", err, out)
	}
	return exe, nil
}
