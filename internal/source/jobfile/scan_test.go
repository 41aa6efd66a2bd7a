package jobfile

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// agree checks that the one-pass path and the general one agree on data:
// whatever the one-pass path accepts, the general path accepts with the
// same result. It reports whether the one-pass path took the file.
func agree(t *testing.T, data []byte) bool {
	t.Helper()
	sh, ok := scanLLD(data)
	if !ok {
		return false
	}
	p := &parser{dir: "/w"}
	fast, err := p.buildLLD(sh)
	if err == nil {
		err = checkOutputs(fast.Actions)
	}
	if err != nil {
		return false // Parse takes the general path for its error
	}
	slow, serr := p.parse(data)
	if serr != nil {
		t.Fatalf("the one-pass path accepts %q, the general path says %v", data, serr)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("the two paths differ on %q:\none-pass %+v\ngeneral  %+v", data, fast, slow)
	}
	return true
}

func TestScanAgrees(t *testing.T) {
	if !agree(t, []byte(lldFile)) {
		t.Fatal("the one-pass path did not take lld's file")
	}
	job := func(i int, extra string) string {
		return fmt.Sprintf(`{"args":["t%[1]d.o","-fthinlto-index=t%[1]d.bc","-o","t%[1]d.n.o"],"inputs":["t%[1]d.o","t%[1]d.bc"],"outputs":["t%[1]d.n.o"]%s}`, i, extra)
	}
	file := func(common, jobs, top string) string {
		return `{"common":{"linker_output":"a.out","args":["/cc","-c"]` + common + `},"jobs":[` + jobs + `]` + top + `}`
	}
	two := job(1, "") + "," + job(2, "")
	taken := []string{
		file("", two, ""),
		file(`,"inputs":[]`, two, ""),
		file(`,"inputs":["prof.data"]`, two, ""),
		file("", job(1, `,"future":{"a":[1,2.5e3,{"b":"}]"}],"c":null}`)+","+job(2, `,"n":-1`), `,"x":true`),
		file("", "", ""),
		" \n\t" + file("", two, "") + "\r\n",
		strings.ReplaceAll(file("", two, ""), `"t1.o"`, `"d\u00e9j\u00e0/t1.o"`),
		strings.ReplaceAll(file("", two, ""), `"t1.o"`, `"dir with \"quotes\" and \\/t1.o"`),
		strings.ReplaceAll(file("", two, ""), `"t1.o"`, "\"d\xc3\xa9j\xc3\xa0/t1.o\""),
		strings.ReplaceAll(file("", two, ""), `"t1.o"`, "\"bad\xffutf8/t1.o\""),
		strings.Replace(file("", two, ""), `"common"`, `"comm\u006fn"`, 1),
	}
	for _, f := range taken {
		if !agree(t, []byte(f)) {
			t.Errorf("the one-pass path did not take %s", f)
		}
	}
	// The general path decides these: its result (or error) stands.
	left := []string{
		file("", job(1, `,"args":["x"]`), ""),                           // a key twice
		strings.Replace(file("", two, ""), `"common"`, `"Common"`, 1),   // keys are case-sensitive
		file("", two, `,"version":1`),                                   // RFC v0
		file(`,"modules":[]`, two, ""),                                  // RFC v0
		file(`,"inputs":null`, two, ""),                                 // null
		file("", job(1, `,"bad":[1,]`), ""),                             // malformed, in a skipped value
		file("", job(1, `,"bad":01`), ""),                               // malformed number
		file("", two, "") + "{}",                                        // trailing data
		file("", two, "")[:40],                                          // cut short
		strings.Replace(file("", two, ""), `"t1.o",`, `"t1.o",7,`, 1),   // a number for a string
		strings.Replace(file("", two, ""), `"t1.o"`, "\"t1\x01.o\"", 1), // a raw control byte
	}
	for _, f := range left {
		if agree(t, []byte(f)) {
			t.Errorf("the one-pass path took %s", f)
		}
		got, gerr := Parse([]byte(f), "/w")
		want, werr := (&parser{dir: "/w"}).parse([]byte(f))
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%s) = %v, %v; the general path gives %v, %v", f, got, gerr, want, werr)
		}
	}
}
