package executor

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/local/proc"
)

func elfHeader(etype uint16) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1 // 64-bit, little endian, version 1
	binary.LittleEndian.PutUint16(h[16:], etype)
	return h
}

func TestCheckObject(t *testing.T) {
	coff := make([]byte, 20)
	binary.LittleEndian.PutUint16(coff, 0x8664)
	bigobj := make([]byte, 20)
	binary.LittleEndian.PutUint16(bigobj[2:], 0xFFFF)
	cases := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"elf-rel", elfHeader(1), ""},
		{"elf-exec", elfHeader(2), "not a relocatable object"},
		{"coff", coff, ""},
		{"coff-bigobj", bigobj, ""},
		{"empty", nil, "empty object"},
		{"bitcode", []byte("BC\xc0\xde\x35\x14\x00\x00\x05\x00\x00\x00\x62\x0c\x30\x24\x4a\x59\xbe\x66"), "neither an ELF nor a COFF"},
		{"short", []byte("\x7fEL"), "neither an ELF nor a COFF"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckObject(p)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantErr)
		}
	}
	if err := CheckObject(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "wrote no object") {
		t.Errorf("absent: %v", err)
	}
}

func TestVerifiedRejectsAndRemoves(t *testing.T) {
	dir := t.TempDir()
	a := &action.Action{ID: "m.o", Dir: dir, Args: []action.Arg{action.Lit("cc"), action.Out("-o", 0)},
		Outputs: []action.Output{{Path: "m.native.o"}}}
	out := []string{filepath.Join(dir, "staged.o")}
	run := func(data []byte, res *Result) error {
		inner := Func(func(context.Context, Job) (*Result, error) {
			if data != nil {
				os.WriteFile(out[0], data, 0o644)
			}
			return res, nil
		})
		_, err := Verified(inner).Execute(context.Background(), Job{Action: a, Out: out})
		return err
	}
	if err := run(elfHeader(1), &Result{}); err != nil {
		t.Fatalf("good object rejected: %v", err)
	}
	for name, c := range map[string]struct {
		data []byte
		res  *Result
		want string
	}{
		"exit":   {elfHeader(1), &Result{Exit: proc.Exit{ExitCode: 3}}, "exit status 3"},
		"signal": {elfHeader(1), &Result{Exit: proc.Exit{ExitCode: -1, Signal: "segmentation fault"}}, "killed by signal"},
		"marker": {elfHeader(1), &Result{Stderr: []byte("x\nError running ThinLTO backend: y\n")}, BackendErrorMarker},
		"empty":  {[]byte{}, &Result{}, "empty object"},
	} {
		err := run(c.data, c.res)
		var be *BackendError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "m.o") {
			t.Errorf("%s: got %v, want a BackendError naming m.o and %q", name, err, c.want)
		}
		if _, err := os.Stat(out[0]); !os.IsNotExist(err) {
			t.Errorf("%s: rejected output left behind", name)
		}
	}
}

// TestVerifiedOnce: a result that a Verified below has checked is marked
// so, and a Verified above does not read its object again (the remote
// side's Verified under the remote cache's); the other checks still apply.
func TestVerifiedOnce(t *testing.T) {
	out := []string{filepath.Join(t.TempDir(), "m.o")}
	a := &action.Action{ID: "m.o"}
	writes := Func(func(ctx context.Context, j Job) (*Result, error) {
		out := j.Out
		return &Result{}, os.WriteFile(out[0], elfHeader(1), 0o644)
	})
	res, err := Verified(writes).Execute(t.Context(), Job{Action: a, Out: out})
	if err != nil || !res.ObjectChecked {
		t.Fatalf("%v, %+v: the checked result is not marked", err, res)
	}
	stale := &Result{ObjectChecked: true}
	if _, err := Verified(Func(func(context.Context, Job) (*Result, error) {
		return stale, os.Remove(out[0])
	})).Execute(t.Context(), Job{Action: a, Out: out}); err != nil {
		t.Errorf("the object of a checked result was read again: %v", err)
	}
	stale.ExitCode, stale.ObjectChecked = 1, true
	if _, err := Verified(Func(func(context.Context, Job) (*Result, error) {
		return stale, nil
	})).Execute(t.Context(), Job{Action: a, Out: out}); err == nil {
		t.Error("a failed compile passed as checked")
	}
}
