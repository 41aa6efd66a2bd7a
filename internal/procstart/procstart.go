// Package procstart reads from /proc when a process started and what it
// is, so that a run can tell how long its parent (lld, running thindist as
// its DTLTO distributor) worked before starting it.
package procstart

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture (the kernel converts to it for user space).
const clockTicks = 100

// Of returns when process pid started, to 1/100 s.
func Of(pid int) (time.Time, error) {
	return of(fmt.Sprintf("/proc/%d/stat", pid), "/proc/uptime", time.Now())
}

// of computes a start time from a stat file and the uptime file, read at
// now.
func of(statPath, uptimePath string, now time.Time) (time.Time, error) {
	stat, err := os.ReadFile(statPath)
	if err != nil {
		return time.Time{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, fmt.Errorf("%s: no command name", statPath)
	}
	fields := strings.Fields(string(stat[i+1:]))
	const startField = 22 - 3 // field 22 (starttime), counted from field 3
	if len(fields) <= startField {
		return time.Time{}, fmt.Errorf("%s: %d fields, no start time", statPath, len(fields)+2)
	}
	ticks, err := strconv.ParseUint(fields[startField], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: start time %q: %v", statPath, fields[startField], err)
	}
	up, err := os.ReadFile(uptimePath)
	if err != nil {
		return time.Time{}, err
	}
	upFields := strings.Fields(string(up))
	if len(upFields) == 0 {
		return time.Time{}, fmt.Errorf("%s: empty", uptimePath)
	}
	secs, err := strconv.ParseFloat(upFields[0], 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %v", uptimePath, err)
	}
	// /proc/uptime counts from the same boot as starttime (CLOCK_BOOTTIME),
	// to 1/100 s; /proc/stat's btime is only to the second.
	boot := now.Add(-time.Duration(secs * float64(time.Second)))
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), nil
}

// Name returns process pid's command name (/proc/<pid>/comm, at most 15
// bytes: "ld.lld", "clang").
func Name(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Cmdline returns process pid's command line (/proc/<pid>/cmdline).
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}

// ParentLinker returns when this process's parent started, if the parent
// is a linker (its name has "ld" in it: ld.lld, ld.lld-22, ld64.lld, ld),
// i.e. how long lld worked before it ran thindist as its distributor.
func ParentLinker() (time.Time, error) {
	ppid := os.Getppid()
	name, err := Name(ppid)
	if err != nil {
		return time.Time{}, err
	}
	if !strings.Contains(name, "ld") {
		return time.Time{}, fmt.Errorf("%w: the parent process is %q", ErrNotLinker, name)
	}
	return Of(ppid)
}

// ErrNotLinker is returned by ParentLinker when the parent is not a linker.
var ErrNotLinker = errors.New("not run by a linker")
