package linkflags

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Replace replaces this process with argv run in dir, as a shell's exec
// does: argv[0] is looked up in PATH unless it names a file, and the
// signals thindist handles (SIGINT, SIGTERM, SIGHUP) get back the
// disposition the process started with (a build started in the background
// ignores SIGINT, and so must the linker). It returns only if that cannot
// be done.
func Replace(dir string, argv []string) error {
	if err := os.Chdir(dir); err != nil {
		return err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	signal.Reset(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	return syscall.Exec(path, argv, os.Environ())
}
