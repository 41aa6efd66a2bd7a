// Package procstart holds the one /proc/PID/stat parser (Stat): it runs
// nothing, and reads from /proc when a process started and what it is,
// so that a run can tell how long its parent (lld, running thindist as
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

// Stat is a process's /proc/<pid>/stat line, split into its fields.
type Stat struct {
	// Comm is the command name (field 2, without its parentheses).
	Comm   string
	path   string   // where it was read, for errors
	fields []string // fields 3 onward (after the command name)
}

// ReadStat reads process pid's /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	return readStat(fmt.Sprintf("/proc/%d/stat", pid))
}

// readStat reads and splits the stat file at path.
func readStat(path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields that follow start after the last ')'.
	open, i := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || i < open {
		return Stat{}, fmt.Errorf("%s: no command name", path)
	}
	return Stat{Comm: string(b[open+1 : i]), path: path, fields: strings.Fields(string(b[i+1:]))}, nil
}

// State is the process's state (field 3): "R" running, "S" sleeping,
// "Z" exited and not yet waited for by its parent, ...
func (s Stat) State() string {
	if len(s.fields) == 0 {
		return ""
	}
	return s.fields[0]
}

// Field returns field n (numbered from 1 as in proc(5), n ≥ 3) as a
// number.
func (s Stat) Field(n int) (uint64, error) {
	if n < 3 || n-3 >= len(s.fields) {
		return 0, fmt.Errorf("%s: %d fields, no field %d", s.path, len(s.fields)+2, n)
	}
	v, err := strconv.ParseUint(s.fields[n-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: field %d %q: %v", s.path, n, s.fields[n-3], err)
	}
	return v, nil
}

// StartTicks is the process's start time (field 22), in clock ticks
// (USER_HZ) after boot: with the PID, it names the process beyond doubt
// within one boot.
func (s Stat) StartTicks() (uint64, error) { return s.Field(22) }

// CPU is the process's CPU time: user and system (fields 14 and 15), and
// with children, those of its children it has waited for (16 and 17).
func (s Stat) CPU(children bool) (time.Duration, error) {
	last := 15
	if children {
		last = 17
	}
	var ticks uint64
	for n := 14; n <= last; n++ {
		v, err := s.Field(n)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// Of returns when process pid started, to 1/100 s.
func Of(pid int) (time.Time, error) {
	return of(fmt.Sprintf("/proc/%d/stat", pid), "/proc/uptime", time.Now())
}

// of computes a start time from a stat file and the uptime file, read at
// now.
func of(statPath, uptimePath string, now time.Time) (time.Time, error) {
	st, err := readStat(statPath)
	if err != nil {
		return time.Time{}, err
	}
	ticks, err := st.StartTicks()
	if err != nil {
		return time.Time{}, err
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
