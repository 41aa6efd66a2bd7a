package toolchain

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
)

// The loader's cache, /etc/ld.so.cache, as glibc 2.32+ writes it (the
// "new" format, glibc's dl-cache.h; ldconfig has written it after the
// old one since glibc 2.2 and alone since 2.32):
//
//	magic "glibc-ld.so.cache" version "1.1"
//	nlibs, len_strings uint32; flags uint8; 3 bytes; extension_offset uint32; 3 x uint32
//	nlibs entries: flags int32, key, value, osversion uint32, hwcap uint64
//
// key and value are offsets from the start of the new header of the
// library's name and path. A file in the old format ("ld.so-1.7.0",
// 12-byte entries) may come first; the new header then follows its
// entries, 8-aligned.
const (
	oldMagic      = "ld.so-1.7.0"
	newMagic      = "glibc-ld.so.cache1.1"
	newHeaderSize = 48
	newEntrySize  = 24
	flagTypeMask  = 0x00ff
	flagELFLibc6  = 0x0003
	oldHeaderSize = 16
	oldEntrySize  = 12
)

// readLdCache returns the cache at path by library name, each name's
// paths in the cache's order, leaving out the entries tuned for hardware
// capabilities (hwcap != 0). A missing file or "" is an empty cache; a
// file in no known format is an error.
func readLdCache(path string) (map[string][]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := parseLdCache(data)
	if err != nil {
		return nil, fmt.Errorf("the loader's cache %s: %w", path, err)
	}
	return m, nil
}

func parseLdCache(data []byte) (map[string][]string, error) {
	start := 0
	if bytes.HasPrefix(data, []byte(oldMagic)) {
		if len(data) < oldHeaderSize {
			return nil, fmt.Errorf("truncated")
		}
		n := int(binary.LittleEndian.Uint32(data[12:]))
		start = (oldHeaderSize + n*oldEntrySize + 7) &^ 7
		if start > len(data) {
			return nil, fmt.Errorf("truncated")
		}
	}
	d := data[start:]
	if !bytes.HasPrefix(d, []byte(newMagic)) || len(d) < newHeaderSize {
		return nil, fmt.Errorf("not in glibc's ld.so.cache format 1.1")
	}
	n := int(binary.LittleEndian.Uint32(d[20:]))
	if newHeaderSize+n*newEntrySize > len(d) {
		return nil, fmt.Errorf("truncated")
	}
	str := func(off uint32) (string, bool) {
		if int(off) >= len(d) {
			return "", false
		}
		end := bytes.IndexByte(d[off:], 0)
		if end < 0 {
			return "", false
		}
		return string(d[off : int(off)+end]), true
	}
	m := map[string][]string{}
	for i := 0; i < n; i++ {
		e := d[newHeaderSize+i*newEntrySize:]
		flags := binary.LittleEndian.Uint32(e)
		hwcap := binary.LittleEndian.Uint64(e[16:])
		if flags&flagTypeMask != flagELFLibc6 || hwcap != 0 {
			continue
		}
		key, ok1 := str(binary.LittleEndian.Uint32(e[4:]))
		value, ok2 := str(binary.LittleEndian.Uint32(e[8:]))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("entry %d points outside the file", i)
		}
		m[key] = append(m[key], value)
	}
	return m, nil
}
