package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// dumpingDistributor writes a distributor that copies the job file to copyTo
// and then runs thindist with the same arguments.
func dumpingDistributor(t *testing.T, dir, copyTo string) string {
	t.Helper()
	script := "#!/bin/sh\nfor a; do last=$a; done\ncp \"$last\" '" + copyTo + "' || exit 3\nexec '" + thindist + "' \"$@\"\n"
	path := filepath.Join(dir, "dump-dist.sh")
	if err := os.WriteFile(path, []byte(script), 0o777); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPrograms links C and C++ programs of 40 modules, with regular and thin
// archive members and a sample profile, through thindist and in process.
func TestPrograms(t *testing.T) {
	for _, tc := range []struct {
		name string
		cxx  bool
	}{{"c", false}, {"cxx", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const modules = 40
			p := program(t, testprog.Options{Modules: modules, CXX: tc.cxx, Seed: 42,
				ArchiveModules: 6, ThinArchiveModules: 5})
			prof, err := p.WriteSampleProfile("sample.prof")
			if err != nil {
				t.Fatal(err)
			}
			jobCopy := filepath.Join(t.TempDir(), "job.json")
			stderr := checkBoth(t, p, linkCmd{
				flags:    []string{"-fprofile-sample-use=sample.prof"},
				distArgs: []string{"--jobs=4"},
			})
			// The summary names every job, none failed, all local.
			if !regexp.MustCompile(`thindist: (?:.*?: )?40 jobs, 0 failed, 0 cached, 0 remote, 40 local`).MatchString(stderr) {
				t.Errorf("no summary line for 40 local jobs in:\n%s", stderr)
			}

			// The profile reaches the backends as a common input.
			l := linkCmd{p: p, objs: p.Objects, out: "prog-dump",
				dist:  dumpingDistributor(t, t.TempDir(), jobCopy),
				flags: []string{"-fprofile-sample-use=sample.prof"}}
			l.mustLink(t)
			var jf jobFile
			data, err := os.ReadFile(jobCopy)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &jf); err != nil {
				t.Fatal(err)
			}
			if len(jf.Common.Inputs) != 1 || !strings.HasSuffix(jf.Common.Inputs[0], "sample.prof") {
				t.Errorf("common.inputs = %q, want the sample profile %s", jf.Common.Inputs, prof)
			}
			if len(jf.Jobs) != modules {
				t.Errorf("%d jobs, want %d", len(jf.Jobs), modules)
			}
			members := 0
			for _, j := range jf.Jobs {
				if strings.Contains(j.Inputs[0], "libfoo.a(") {
					members++
				}
			}
			if members != 6 {
				t.Errorf("%d jobs for regular archive members, want 6", members)
			}
			if got := runProg(t, p, "prog-dump"); got != p.Want {
				t.Errorf("prints %q, want %q", got, p.Want)
			}
			noLeftovers(t, p.Dir)
		})
	}
}
