package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKbuildLink(t *testing.T) {
	saved := "savedcmd_vmlinux.o := /k/bin/ld-wrap -m elf_x86_64 -mllvm -import-instr-limit=5 -z noexecstack --thinlto-cache-dir=.thinlto-cache -r -o vmlinux.o  " +
		"-T .tmp_initcalls.lds --whole-archive vmlinux.a --no-whole-archive --start-group  --end-group  ; " +
		"./tools/objtool/objtool --link vmlinux.o\n\nvmlinux.o: $(wildcard ./tools/objtool/objtool)\n"
	got, err := kbuildLink(saved, "/usr/bin/ld.lld")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/bin/ld.lld", "-m", "elf_x86_64", "-mllvm", "-import-instr-limit=5", "-z", "noexecstack", "-r",
		"-T", ".tmp_initcalls.lds", "--whole-archive", "vmlinux.a", "--no-whole-archive", "--start-group", "--end-group"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, bad := range []string{
		"no command here",
		"savedcmd_vmlinux := ld.lld -o vmlinux vmlinux.o",          // not the -r link of vmlinux.a
		"savedcmd_vmlinux.o := ld.lld -r -o vmlinux.o 'vmlinux.a'", // quoted
	} {
		if got, err := kbuildLink(bad, "ld.lld"); err == nil {
			t.Errorf("%q: got %q, want an error", bad, got)
		}
	}
}

func TestSplitVmlinux(t *testing.T) {
	// Two fork.o (matched in offset order), a module only lld ran (left
	// out), and one thindist ran twice (left out: the counts differ).
	trace := `{"traceEvents": [
	 {"name": "Run ThinLTO", "ph": "X", "dur": 9000},
	 {"name": "Run ThinLTO backend thread (in-process)", "ph": "X", "dur": 1000, "args": {"detail": "vmlinux.a(fork.o at 500)"}},
	 {"name": "Run ThinLTO backend thread (in-process)", "ph": "X", "dur": 7000, "args": {"detail": "vmlinux.a(fork.o at 100)"}},
	 {"name": "Run ThinLTO backend thread (in-process)", "ph": "X", "dur": 3000, "args": {"detail": "vmlinux.a(only.o at 900)"}},
	 {"name": "Run ThinLTO backend thread (in-process)", "ph": "X", "dur": 3000, "args": {"detail": "vmlinux.a(twice.o at 700)"}},
	 {"name": "Thin backend", "ph": "X", "dur": 800, "args": {"detail": "vmlinux.a(fork.o at 500)"}}
	]}`
	record := `{"actions": [
	 {"output": "/tmp/x/vmlinux.a(fork.o at 104).3.99.native.o", "cpu_us": 7500, "start_us": 0, "end_us": 8000},
	 {"output": "/tmp/x/vmlinux.a(fork.o at 504).4.99.native.o", "cpu_us": 2000, "start_us": 0, "end_us": 2600},
	 {"output": "/tmp/x/vmlinux.a(twice.o at 704).5.99.native.o", "cpu_us": 5000, "start_us": 0, "end_us": 5000},
	 {"output": "/tmp/x/vmlinux.a(twice.o at 708).6.99.native.o", "cpu_us": 5000, "start_us": 0, "end_us": 5000}],
	 "phases": [{"name": "thin link", "start": "2026-11-29T09:00:00Z", "end": "2026-11-29T09:00:01Z"},
	            {"name": "backends", "start": "2026-11-29T09:00:01Z", "end": "2026-11-29T09:00:11Z"}]}`
	s, n, err := splitVmlinux([]byte(trace), []byte(record))
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if n != 4 || s.matched != 2 || s.inproc != 8*ms || s.cpu != 9500*time.Microsecond || s.slot != 10600*time.Microsecond {
		t.Errorf("n %d, matched %d, in-process %v, cpu %v, slot %v", n, s.matched, s.inproc, s.cpu, s.slot)
	}
	// Only the 1 ms fork.o is under 5 ms: 2 ms of CPU against 1 ms.
	if s.small != 1 || s.fixed != ms {
		t.Errorf("small %d, fixed %v", s.small, s.fixed)
	}
	if s.slotOverCPU != 550*time.Microsecond || s.lldRun != 9*ms || s.thinLink != time.Second || s.backends != 10*time.Second {
		t.Errorf("slot over CPU %v, lld's run %v, thin link %v, backends %v", s.slotOverCPU, s.lldRun, s.thinLink, s.backends)
	}
	if _, _, err := splitVmlinux([]byte(`{"traceEvents": []}`), []byte(record)); err == nil {
		t.Error("nothing to match: want an error")
	}
}

func TestVmlinuxMarkdown(t *testing.T) {
	s := time.Second
	v := &vmlinuxResult{inputs: 564, same: true,
		wall:  [2][]time.Duration{{20 * s, 22 * s, 21 * s}, {22 * s, 22 * s, 23 * s}},
		split: &vmlinuxSplit{matched: 564, inproc: 40 * s, cpu: 41 * s, slot: 42 * s}}
	var b strings.Builder
	v.markdown(&b, 2)
	// Ratios of the pairs: 1.1, 1.0, 1.095…; of the medians 22/21.
	for _, want := range []string{"564 backends", "3 pairs", "byte-identical", "| 21.000 s | 22.000 s | 1.048 | 1.095 | 1.000 | 1.100 |", "+2.5 %"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	v.wall = [2][]time.Duration{}
	b.Reset()
	v.markdown(&b, 2)
	if !strings.Contains(b.String(), "No timed pair") || !strings.Contains(v.text(), "no timed pair") {
		t.Errorf("without pairs:\n%s", b.String())
	}
}
