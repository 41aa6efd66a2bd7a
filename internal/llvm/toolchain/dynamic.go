package toolchain

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
)

// dynStrings returns the values of obj's dynamic entries with tag (a
// string entry: DT_NEEDED, DT_RPATH, DT_RUNPATH), in their order, read
// from r, the file obj was made from. Unlike elf.File.DynString it reads
// only those strings, not the whole dynamic string table, which for
// libLLVM holds every exported symbol's name (megabytes).
func dynStrings(obj *elf.File, r io.ReaderAt, tag elf.DynTag) ([]string, error) {
	var dyn *elf.Prog
	for _, p := range obj.Progs {
		if p.Type == elf.PT_DYNAMIC {
			dyn = p
		}
	}
	if dyn == nil {
		return nil, nil
	}
	data := make([]byte, dyn.Filesz)
	if _, err := dyn.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("reading the dynamic section: %w", err)
	}
	size := 16
	if obj.Class == elf.ELFCLASS32 {
		size = 8
	}
	entry := func(b []byte) (elf.DynTag, uint64) {
		if size == 8 {
			return elf.DynTag(int32(obj.ByteOrder.Uint32(b))), uint64(obj.ByteOrder.Uint32(b[4:]))
		}
		return elf.DynTag(int64(obj.ByteOrder.Uint64(b))), obj.ByteOrder.Uint64(b[8:])
	}
	var strtab, strsz uint64
	var offs []uint64
	for i := 0; i+size <= len(data); i += size {
		t, v := entry(data[i:])
		switch t {
		case elf.DT_NULL:
			i = len(data)
		case elf.DT_STRTAB:
			strtab = v
		case elf.DT_STRSZ:
			strsz = v
		case tag:
			offs = append(offs, v)
		}
	}
	if len(offs) == 0 {
		return nil, nil
	}
	base, ok := fileOffset(obj, strtab)
	if !ok {
		return nil, fmt.Errorf("its string table (address %#x) is in no loaded segment", strtab)
	}
	var vals []string
	for _, off := range offs {
		if off >= strsz {
			return nil, fmt.Errorf("a dynamic entry's string at %d is outside the string table (%d bytes)", off, strsz)
		}
		s, err := readCString(r, int64(base+off), int(min(strsz-off, 1<<16)))
		if err != nil {
			return nil, err
		}
		vals = append(vals, s)
	}
	return vals, nil
}

// fileOffset is the file offset of the virtual address a.
func fileOffset(obj *elf.File, a uint64) (uint64, bool) {
	for _, p := range obj.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr <= a && a < p.Vaddr+p.Filesz {
			return a - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// readCString reads the NUL-terminated string at off in r, of at most max
// bytes.
func readCString(r io.ReaderAt, off int64, max int) (string, error) {
	var out []byte
	buf := make([]byte, 256)
	for len(out) < max {
		n, err := r.ReadAt(buf, off+int64(len(out)))
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf[:n]...)
		if err != nil {
			return "", fmt.Errorf("reading a dynamic string: %w", err)
		}
	}
	return "", fmt.Errorf("a dynamic string is not terminated")
}
