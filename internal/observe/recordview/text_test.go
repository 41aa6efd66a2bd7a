package recordview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
)

// TestReportShowsTransfersAndPhaseDetail: the text report and the HTML
// page show each module's bytes up and down, the run's totals, the
// phases' details (as the summary line does) and the entry point by name.
func TestReportShowsTransfersAndPhaseDetail(t *testing.T) {
	start := time.Now()
	r1 := act("remote.o", record.WhereRemote, 0, 80_000)
	r1.BytesUp, r1.BytesDown = 3<<20, 5<<10
	r2 := act("hit.o", record.WhereRemoteCache, 0, 10_000)
	r2.BytesDown = 7 << 10
	run := &record.Run{ID: "x", Entry: "plugin", Linker: []string{"ld.lld", "-o", "app"}, Start: start, End: start.Add(time.Second), Remote: "grpc://h:1",
		Invocation: "inv-1", Compression: "auto: uploads compressed: measured 11.9 MB/s up", BytesUp: r1.BytesUp, BytesDown: r1.BytesDown + r2.BytesDown,
		Phases:  []record.Phase{{Name: "backends", Start: start, End: start.Add(time.Second), Detail: "300ms starting 1 fork server"}},
		Actions: []record.Action{r1, r2, act("local.o", record.WhereLocal, 0, 50_000)}}

	var text bytes.Buffer
	WriteText(&text, run)
	for _, want := range []string{"(the linker plugin)", "  linker:   ld.lld -o app\n", "3.0 MiB up, 12.0 KiB down; invocation inv-1", "  compress: auto: uploads compressed: measured 11.9 MB/s up\n", "backends 1s including 300ms starting 1 fork server",
		"remote.o (remote, CPU 80ms, 0 B bitcode, 3.0 MiB up, 5.0 KiB down)", "local.o (local, exec'd, CPU 50ms, 0 B bitcode)\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<th data-num>uploaded</th><th data-num>downloaded</th>",
		`<td class="n" data-v="3145728">3.0 MiB</td><td class="n" data-v="5120">5.0 KiB</td>`,
		`<td class="n" data-v="0"></td><td class="n" data-v="7168">7.0 KiB</td>`,
		"3.0 MiB uploaded, 12.0 KiB downloaded; invocation inv-1", "<td>compress</td><td>auto: uploads compressed: measured 11.9 MB/s up</td>", "including 300ms starting 1 fork server", "(the linker plugin)",
		`<code id="linker">ld.lld -o app</code>`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML page lacks %q", want)
		}
	}
}

// TestReportSaysWhichRunner: the text report and the HTML page say which
// modules a worker compiled, the worker server whose workers they were,
// and why the others were not.
func TestReportSaysWhichRunner(t *testing.T) {
	start := time.Now()
	w := act("w.o", record.WhereLocal, 0, 50_000)
	w.Worker = true
	x := act("x.o", record.WhereLocal, 0, 60_000)
	x.NotWorker = `/usr/bin/clang-19 is "Debian clang version 19.1.7", the worker is built for "Debian clang version 22.1.8"`
	server := "the worker server, pid 42, /run/user/1000/thindist/server.sock, started by this link"
	run := &record.Run{ID: "x", Entry: "dtlto", Start: start, End: start.Add(time.Second), Actions: []record.Action{w, x}, WorkerServer: server}
	var text, page bytes.Buffer
	WriteText(&text, run)
	for _, want := range []string{"2 local (0 forked, 1 on a worker)", "  workers:  " + server + "\n", "w.o (local, worker, CPU 50ms",
		"x.o (local, exec'd, CPU 60ms", "  no worker: " + x.NotWorker + ": x.o\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := WriteHTML(&page, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(0 forked, 1 on a worker)", "<tr><td>workers</td><td>" + server + "</td></tr>"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML page lacks %q", want)
		}
	}
}
