package executor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/sys/describe"
	"github.com/thindist/thindist/internal/sys/plainfile"
)

// BackendErrorMarker is what clang prints when a ThinLTO backend fails in a
// way it still exits 0 from (a missing import: llvm/llvm-project#75441),
// leaving an empty object that lld would link silently.
const BackendErrorMarker = "Error running ThinLTO backend"

// Verified wraps next so that a result is only returned as a success when the
// compiler exited 0, said nothing of a failed backend, and wrote an object
// file as outputs[0]. Anything else becomes a *BackendError and its outputs
// are removed, so it can neither reach the linker nor a cache.
func Verified(next Executor) Executor { return verified{next} }

type verified struct{ next Executor }

func (v verified) Execute(ctx context.Context, j Job) (*Result, error) {
	res, err := v.next.Execute(ctx, j)
	if err != nil {
		return res, err
	}
	if err := check(j.Action, res, j.Out[0], !res.ObjectChecked); err != nil {
		for _, o := range j.Out {
			os.Remove(o)
		}
		return res, err
	}
	res.ObjectChecked = true
	return res, nil
}

// Describe names the decorator and the executors it wraps (describe.Describer).
func (v verified) Describe() describe.Node { return node("Verified", v.next) }

func (v verified) String() string { return describe.Line(v) }

// check applies the checks of Verified to a's result res, whose primary
// output is at obj: the command's status, the backend error marker on its
// stderr and, when object is set, the object itself (CheckObject).
func check(a *action.Action, res *Result, obj string, object bool) error {
	fail := func(said bool, format string, args ...any) error {
		return &BackendError{Action: a, Result: res, Reason: fmt.Sprintf(format, args...), Said: said}
	}
	if res.Failed() {
		return fail(false, "%s", res.Status())
	}
	if bytes.Contains(res.Stderr, []byte(BackendErrorMarker)) {
		return fail(true, "the compiler exited 0 but reported %q", BackendErrorMarker)
	}
	if object {
		if err := CheckObject(obj); err != nil {
			// An unusable object the compiler said something about
			// (clang 19 on LLVM 22 bitcode: "Error loading index
			// file ... Invalid summary version", exit 0, no object
			// bytes) is its failure; one it said nothing about was
			// lost after it.
			return fail(len(bytes.TrimSpace(res.Stderr)) > 0, "%v", err)
		}
	}
	return nil
}

// CheckObject requires a non-empty ELF relocatable object or COFF object.
func CheckObject(path string) error {
	var hdr [64]byte
	n, err := plainfile.ReadHead(path, hdr[:])
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the compiler exited 0 but wrote no object file")
		}
		return fmt.Errorf("cannot read the object file: %v", err)
	}
	return checkHeader(hdr[:n])
}

// CheckObjectBytes is CheckObject on the contents of an object file, for
// an executor that has them in memory as it writes them.
func CheckObjectBytes(data []byte) error {
	return checkHeader(data[:min(len(data), 64)])
}

func checkHeader(h []byte) error {
	if len(h) >= 18 && bytes.Equal(h[:4], []byte("\x7fELF")) {
		var et uint16
		switch h[5] {
		case 1:
			et = binary.LittleEndian.Uint16(h[16:])
		case 2:
			et = binary.BigEndian.Uint16(h[16:])
		default:
			return fmt.Errorf("the object file has an invalid ELF data encoding %d", h[5])
		}
		if et != 1 { // ET_REL
			return fmt.Errorf("the output is an ELF file of type %d, not a relocatable object", et)
		}
		return nil
	}
	if len(h) >= 20 {
		switch binary.LittleEndian.Uint16(h) {
		case 0x8664, 0x14c, 0xaa64, 0x1c4, 0xa641, 0xa64e: // AMD64, I386, ARM64, ARMNT, ARM64EC, ARM64X
			return nil
		case 0: // bigobj COFF: Sig1=0, Sig2=0xFFFF
			if binary.LittleEndian.Uint16(h[2:]) == 0xFFFF {
				return nil
			}
		}
	}
	if len(h) == 0 {
		return fmt.Errorf("the compiler exited 0 but wrote an empty object file (0 bytes)")
	}
	return fmt.Errorf("the output is neither an ELF nor a COFF object (starts with % x)", h[:min(len(h), 8)])
}
