package procstart

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOfParsesStat checks the arithmetic on a stat line whose command name
// holds spaces and parentheses.
func TestOfParsesStat(t *testing.T) {
	dir := t.TempDir()
	stat := filepath.Join(dir, "stat")
	uptime := filepath.Join(dir, "uptime")
	// Field 22 is 12345 ticks: 123.45 s after boot.
	os.WriteFile(stat, []byte("4242 (ld.lld (x) y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12345 999 1000\n"), 0o644)
	os.WriteFile(uptime, []byte("200.00 150.00\n"), 0o644)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := of(stat, uptime, now)
	if err != nil {
		t.Fatal(err)
	}
	want := now.Add(-200 * time.Second).Add(12345 * 10 * time.Millisecond)
	if !got.Equal(want) {
		t.Errorf("start %v, want %v", got, want)
	}
	os.WriteFile(stat, []byte("4242 (x) S 1 2\n"), 0o644)
	if _, err := of(stat, uptime, now); err == nil {
		t.Error("a short stat line is accepted")
	}
}

// TestOfRealProcess checks a process started between two readings of the
// clock (to the 1/100 s of /proc's unit, with slack for rounding).
func TestOfRealProcess(t *testing.T) {
	before := time.Now()
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Process.Kill()
	after := time.Now()
	got, err := Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const slack = 50 * time.Millisecond
	if got.Before(before.Add(-slack)) || got.After(after.Add(slack)) {
		t.Errorf("start %v, want it between %v and %v", got, before, after)
	}
	// Start returns once the child is forked, maybe before it has exec'd
	// sleep: until then /proc shows the test's own name and command line.
	// The kernel sets the new name before it maps the new arguments, so in
	// between the name is "sleep" and the command line is empty: wait for
	// both.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		name, _ := Name(cmd.Process.Pid)
		args, _ := Cmdline(cmd.Process.Pid)
		if name == "sleep" && len(args) == 2 {
			break
		}
	}
	if name, err := Name(cmd.Process.Pid); err != nil || name != "sleep" {
		t.Errorf("name %q, %v", name, err)
	}
	if args, err := Cmdline(cmd.Process.Pid); err != nil || len(args) != 2 || args[0] != "sleep" || args[1] != "5" {
		t.Errorf("command line %q, %v; want sleep 5", args, err)
	}
	if _, err := ParentLinker(); err == nil {
		t.Errorf("the test's parent (go test) taken for a linker")
	}
}

// TestStatFields reads fields by their proc(5) numbers past a command name
// with spaces and parentheses, and sums the CPU fields in clock ticks.
func TestStatFields(t *testing.T) {
	stat := filepath.Join(t.TempDir(), "stat")
	// Fields 14-17 (utime, stime, cutime, cstime) are 100, 50, 7, 3.
	os.WriteFile(stat, []byte("4242 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 100 50 7 3 15 16 17 18 12345 999\n"), 0o644)
	st, err := readStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "a) b (c)" {
		t.Errorf("Comm = %q, want %q", st.Comm, "a) b (c)")
	}
	if v, err := st.Field(4); err != nil || v != 1 {
		t.Errorf("field 4 (the parent) = %d, %v; want 1", v, err)
	}
	if v, err := st.Field(3); err == nil {
		t.Errorf("field 3 (the state, S) read as the number %d", v)
	}
	if v, err := st.StartTicks(); err != nil || v != 12345 {
		t.Errorf("StartTicks = %d, %v; want 12345", v, err)
	}
	if d, err := st.CPU(false); err != nil || d != 1500*time.Millisecond {
		t.Errorf("CPU(false) = %v, %v; want 1.5s", d, err)
	}
	if d, err := st.CPU(true); err != nil || d != 1600*time.Millisecond {
		t.Errorf("CPU(true) = %v, %v; want 1.6s", d, err)
	}
	if _, err := st.Field(40); err == nil {
		t.Error("a field past the line's end is read")
	}
}
