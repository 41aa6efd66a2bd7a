package reapi

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thindist/thindist/internal/sys/digest"
)

// A group is several backend actions run as one REAPI Action, so that a
// link of thousands of tiny modules pays one execution (its Execute
// stream, its queueing, a worker's setup) per group instead of per
// module. The RFC lists this as future work under "batching".
//
// REAPI has no notion of a batch: an Action is one command. The group's
// command is therefore a POSIX shell script, /bin/sh being the one
// interpreter a Linux worker image that runs clang is certain to have
// (Bazel's own actions rely on it the same way); thindist itself is not
// uploaded as a runner because the workers' OS and architecture need not
// be this machine's. The script runs every member, each in its own
// working directory, and records each one's exit status, CPU time and
// combined output in files of its own, so that one member's failure is
// that member's, with its own stderr, and the others' results stand.
//
// The input root holds each member's own input root, unchanged, under
// the directory "<i>": the members' files cannot collide, the Directory
// blobs are those the member would send alone (already in the CAS if it
// ran before), and each member's part of the root stays identifiable
// (the simulation in internal/testsupport/reapitest replays members by it).

// groupArg0 is the script's $0: it marks a command as a group.
const groupArg0 = "thindist-group"

// GroupShell runs the group script on the worker.
const GroupShell = "/bin/sh"

// groupScript takes, after $0, each member as: its working directory
// (relative to the input root), its argument count n, its n arguments.
// It runs the members one after the other, each in a subshell that keeps
// only its own arguments and execs the compiler; writes the member's
// stdout and stderr to GroupLog and "exit status, then the output of the
// POSIX times builtin" to GroupStatus; and exits 1 if any member failed,
// so that the server does not cache the group.
const groupScript = `rc=0
while [ $# -gt 0 ]; do
	d=$1 n=$2
	shift 2
	(
		cd "$d" || exit 125
		k=$#
		i=0
		for a do
			[ "$i" -lt "$n" ] || break
			set -- "$@" "$a"
			i=$((i + 1))
		done
		shift "$k"
		exec "$@"
	) >"$d/` + groupLog + `" 2>&1
	s=$?
	{ echo "$s"; times; } >"$d/` + groupStatus + `"
	[ "$s" -eq 0 ] || rc=1
	shift "$n"
done
exit "$rc"
`

// Each member's status and output files, relative to its working
// directory, in thindist's own directory of the input root.
const (
	groupStatus = StableDir + "/group.status"
	groupLog    = StableDir + "/group.log"
)

// Group is the Action that runs several executables together.
type Group struct {
	// Executable is the group's own Action. Its Outputs are every member's
	// outputs, status and log files (sorted, as REAPI requires).
	*Executable
	Members []*Executable
}

// GroupOptions shapes the group's Action.
type GroupOptions struct {
	// Timeout bounds each member; the group gets their sum. 0 leaves it
	// to the server.
	Timeout time.Duration
}

func memberDir(i int, m *Executable) string {
	return path.Join(strconv.Itoa(i), m.Command.WorkingDirectory)
}

// MemberOutput is where member i's output j appears in the group's
// ActionResult.
func (g *Group) MemberOutput(i, j int) string {
	return path.Join(memberDir(i, g.Members[i]), g.Members[i].Outputs[j])
}

// MemberStatus is where member i's status file appears in the group's
// ActionResult.
func (g *Group) MemberStatus(i int) string { return path.Join(memberDir(i, g.Members[i]), groupStatus) }

// MemberLog is where member i's stdout and stderr appear in the group's
// ActionResult.
func (g *Group) MemberLog(i int) string { return path.Join(memberDir(i, g.Members[i]), groupLog) }

// BuildGroup composes members (each built by BuildExecutable with the same
// platform and environment) into one executable Action.
func BuildGroup(members []*Executable, o GroupOptions) (*Group, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("a group needs members")
	}
	first := members[0].Command
	g := &Group{Members: members}
	root := &repb.Directory{}
	blobs := map[digest.Digest][]byte{}
	files := map[digest.Digest]string{}
	args := []string{GroupShell, "-c", groupScript, groupArg0}
	var outs []string
	for i, m := range members {
		if !sameEnv(m.Command, first) {
			return nil, fmt.Errorf("group member %d has another platform or environment", i)
		}
		root.Directories = append(root.Directories, &repb.DirectoryNode{Name: strconv.Itoa(i), Digest: m.Action.InputRootDigest})
		cmdDigest, err := digest.FromProto(m.Action.CommandDigest)
		if err != nil {
			return nil, err
		}
		for d, b := range m.Blobs {
			if d != m.ActionDigest && d != cmdDigest {
				blobs[d] = b
			}
		}
		for d, f := range m.Files {
			files[d] = f
		}
		args = append(args, memberDir(i, m), strconv.Itoa(len(m.Command.Arguments)))
		args = append(args, m.Command.Arguments...)
		for j := range m.Outputs {
			outs = append(outs, g.MemberOutput(i, j))
		}
		outs = append(outs, g.MemberStatus(i), g.MemberLog(i))
	}
	sort.Slice(root.Directories, func(i, j int) bool { return root.Directories[i].Name < root.Directories[j].Name })
	sort.Strings(outs)
	rootDigest, rootBytes, err := digest.OfMessage(root)
	if err != nil {
		return nil, err
	}
	blobs[rootDigest] = rootBytes
	cmd := &repb.Command{
		Arguments:            args,
		EnvironmentVariables: first.EnvironmentVariables,
		OutputPaths:          outs,
		Platform:             first.Platform,
	}
	cmdDigest, cmdBytes, err := digest.OfMessage(cmd)
	if err != nil {
		return nil, err
	}
	blobs[cmdDigest] = cmdBytes
	act := &repb.Action{CommandDigest: cmdDigest.Proto(), InputRootDigest: rootDigest.Proto(), Platform: first.Platform}
	if o.Timeout > 0 {
		act.Timeout = durationpb.New(o.Timeout * time.Duration(len(members)))
	}
	actDigest, actBytes, err := digest.OfMessage(act)
	if err != nil {
		return nil, err
	}
	blobs[actDigest] = actBytes
	g.Executable = &Executable{Action: act, ActionDigest: actDigest, Command: cmd, Blobs: blobs, Files: files, Outputs: outs}
	return g, nil
}

func sameEnv(a, b *repb.Command) bool {
	if len(a.EnvironmentVariables) != len(b.EnvironmentVariables) ||
		len(a.GetPlatform().GetProperties()) != len(b.GetPlatform().GetProperties()) {
		return false
	}
	for i, v := range a.EnvironmentVariables {
		w := b.EnvironmentVariables[i]
		if v.Name != w.Name || v.Value != w.Value {
			return false
		}
	}
	for i, p := range a.GetPlatform().GetProperties() {
		q := b.Platform.Properties[i]
		if p.Name != q.Name || p.Value != q.Value {
			return false
		}
	}
	return true
}

// GroupMember is one member of a group command, as ParseGroup reads it.
type GroupMember struct {
	// Root is the name of the member's input root in the group's.
	Root string
	// WorkingDirectory is the member's, relative to its own input root.
	WorkingDirectory string
	// Arguments is its command.
	Arguments []string
	// Status and Log are its status and output files, relative to the
	// group's working directory.
	Status, Log string
}

// ParseGroup reads the members of a group command; ok is false for any
// other command. It serves a server-side reader (the test double's
// simulation), which must recognise a group without thindist's state.
func ParseGroup(cmd *repb.Command) (members []GroupMember, ok bool) {
	args := cmd.GetArguments()
	if len(args) < 4 || args[0] != GroupShell || args[1] != "-c" || args[2] != groupScript || args[3] != groupArg0 {
		return nil, false
	}
	rest := args[4:]
	for len(rest) > 0 {
		if len(rest) < 2 {
			return nil, false
		}
		dir := rest[0]
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 1 || n > len(rest)-2 {
			return nil, false
		}
		root, wd, _ := strings.Cut(dir, "/")
		members = append(members, GroupMember{Root: root, WorkingDirectory: wd, Arguments: rest[2 : 2+n],
			Status: path.Join(dir, groupStatus), Log: path.Join(dir, groupLog)})
		rest = rest[2+n:]
	}
	return members, len(members) > 0
}

// timesLine matches a line of the POSIX times builtin: user and system
// time as "<minutes>m<seconds>s" ("0m0.030000s 0m0.004000s").
var timesLine = regexp.MustCompile(`^\s*(\d+)m([0-9.]+)s\s+(\d+)m([0-9.]+)s\s*$`)

// ParseGroupStatus reads a member's status file: its exit status, and
// the CPU time (user + system) of the children the group's shell has
// waited for so far, this member's included.
func ParseGroupStatus(data []byte) (exit int, children time.Duration, err error) {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	exit, err = strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return 0, 0, fmt.Errorf("the group's status file %q has no exit status", bytes.TrimSpace(data))
	}
	if len(lines) >= 3 {
		if m := timesLine.FindStringSubmatch(lines[2]); m != nil {
			children = minSec(m[1], m[2]) + minSec(m[3], m[4])
		}
	}
	return exit, children, nil
}

func minSec(m, s string) time.Duration {
	mins, _ := strconv.Atoi(m)
	secs, _ := strconv.ParseFloat(s, 64)
	return time.Duration(mins)*time.Minute + time.Duration(secs*float64(time.Second))
}

// GroupStatus is the status file the group script writes for a member
// that exited with exit once its shell's children had used children CPU
// time (for a server that simulates the script).
func GroupStatus(exit int, children time.Duration) []byte {
	sec := children.Seconds()
	return fmt.Appendf(nil, "%d\n0m0.000000s 0m0.000000s\n%dm%.6fs 0m0.000000s\n", exit, int(sec/60), sec-60*float64(int(sec/60)))
}
