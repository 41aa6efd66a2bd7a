package reapitest

// The chrooted worker (Options.Chroot): each command runs with its input
// root as "/", nothing of this machine visible (no /proc, /dev, /lib, no
// shell), as Buildbarn's bb_runner with chroot_into_input_root: a remote
// action passes only if it carries everything it executes and reads. The
// input files are hard links to one copy per content, as a real worker's
// file cache makes them, so that a shipped toolchain of hundreds of MB is
// written once, not once per action.

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// linkCache holds one file per input content (and mode) that the chrooted
// worker's input roots link to.
type linkCache struct {
	mu    sync.Mutex
	dir   string
	files map[string]string // digest key and mode -> file
}

// place puts content at p: a hard link to the cache's copy, made on first
// use in a directory under parent (which must be on p's file system).
func (c *linkCache) place(parent, p, key string, content []byte, mode os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir == "" {
		d, err := os.MkdirTemp(parent, "reapitest-files-")
		if err != nil {
			return err
		}
		c.dir = d
	}
	k := key + "-" + mode.String()
	src, ok := c.files[k]
	if !ok {
		if c.files == nil {
			c.files = map[string]string{}
		}
		src = filepath.Join(c.dir, strings.NewReplacer("/", "-").Replace(k))
		if err := os.WriteFile(src, content, mode); err != nil {
			return err
		}
		if err := os.Chmod(src, mode); err != nil {
			return err
		}
		c.files[k] = src
	}
	return os.Link(src, p)
}

// remove deletes the cache's files.
func (c *linkCache) remove() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		os.RemoveAll(c.dir)
		c.dir, c.files = "", nil
	}
}

// chrootProgram is arguments[0] as the chrooted command's path: relative to
// its working directory wd (inside the root) when it has a slash. A bare
// name would be looked up in a PATH the root does not have.
func chrootProgram(name, wd string) (string, error) {
	if !strings.ContainsRune(name, '/') {
		return "", status.Errorf(codes.InvalidArgument, "reapitest: chrooted worker: %q is not a path in the input root (no PATH lookup in a chroot)", name)
	}
	if path.IsAbs(name) {
		return name, nil
	}
	return path.Join("/", wd, name), nil
}

// chrootEnv is the program Buildbarn's chrooting runner starts every
// command through (Options.ChrootEnv), inside the input root, so that
// the command is looked up there (golang/go#39341).
const chrootEnv = "/usr/bin/env"

// chrootAttr runs a command with root as its "/".
func chrootAttr(root string) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Chroot: root}
}

// ChrootSupported says why the chrooted worker cannot run here ("" when
// it can): chroot needs root.
func ChrootSupported() string {
	if os.Geteuid() != 0 {
		return "the chrooted worker (Options.Chroot) needs root for chroot(2)"
	}
	return ""
}
