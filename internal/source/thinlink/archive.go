package thinlink

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Kind is what a linker input holds, judged by its content, never its name.
type Kind uint8

const (
	KindOther   Kind = iota // an ELF object, a shared library, a linker script...
	KindBitcode             // LLVM bitcode, raw or in the wrapper header
	KindArchive             // a regular "!<arch>" archive
	KindThin                // a thin "!<thin>" archive
	KindMissing             // cannot be opened: left for the linker to report
)

// isBitcode reports whether the first bytes of a file are LLVM bitcode:
// 'B' 'C' 0xC0 0xDE, or the wrapper magic 0x0B17C0DE (little endian).
func isBitcode(h []byte) bool {
	return bytes.HasPrefix(h, []byte{'B', 'C', 0xC0, 0xDE}) ||
		bytes.HasPrefix(h, []byte{0xDE, 0xC0, 0x17, 0x0B})
}

// classify reads the head of the file at path.
func classify(path string) Kind {
	f, err := os.Open(path)
	if err != nil {
		return KindMissing
	}
	defer f.Close()
	var h [8]byte
	n, _ := io.ReadFull(f, h[:])
	switch {
	case isBitcode(h[:n]):
		return KindBitcode
	case string(h[:n]) == "!<arch>\n":
		return KindArchive
	case string(h[:n]) == "!<thin>\n":
		return KindThin
	}
	return KindOther
}

// Member is one file of an archive.
type Member struct {
	// Name is the member's name as stored (a path for thin archives).
	Name string
	// Offset is where its header starts in the archive, as lld prints it in
	// "lib.a(m.o at 88)".
	Offset int64
	// Data is the content of a regular archive's member; nil for a thin one.
	Data []byte
	// Bitcode says whether the member is LLVM bitcode.
	Bitcode bool
	// Size is the member's size in bytes (a thin member's as the archive
	// records it).
	Size int64
}

// Archive is a parsed archive file.
type Archive struct {
	Path    string
	Thin    bool
	Members []Member
}

// readArchive parses a GNU/System V or BSD archive, regular or thin. For a
// thin archive it reads each member's head from the file it refers to,
// relative to the archive's directory, to classify it.
func readArchive(path string) (*Archive, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ar := &Archive{Path: path}
	switch {
	case bytes.HasPrefix(data, []byte("!<arch>\n")):
	case bytes.HasPrefix(data, []byte("!<thin>\n")):
		ar.Thin = true
	default:
		return nil, fmt.Errorf("%s: not an archive", path)
	}
	var longNames []byte
	off := int64(8)
	for off < int64(len(data)) {
		if data[off] == '\n' { // padding
			off++
			continue
		}
		if off+60 > int64(len(data)) {
			return nil, fmt.Errorf("%s: truncated member header at offset %d", path, off)
		}
		hdr := data[off : off+60]
		if string(hdr[58:60]) != "`\n" {
			return nil, fmt.Errorf("%s: bad member header at offset %d", path, off)
		}
		rawName := strings.TrimRight(string(hdr[0:16]), " ")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("%s: bad member size at offset %d", path, off)
		}
		body := off + 60
		// Thin archives store the symbol table and the long-name table, but
		// no member data.
		special := rawName == "/" || rawName == "//" || rawName == "/SYM64/" ||
			rawName == "__.SYMDEF" || rawName == "__.SYMDEF SORTED" || strings.HasPrefix(rawName, "#1/__.SYMDEF")
		stored := !ar.Thin || special
		if stored && body+size > int64(len(data)) {
			return nil, fmt.Errorf("%s: member at offset %d runs past the end", path, off)
		}
		var content []byte
		if stored {
			content = data[body : body+size]
		}
		name := rawName
		switch {
		case rawName == "//":
			longNames = content
		case special:
		case strings.HasPrefix(rawName, "#1/"): // BSD: name follows the header
			n, err := strconv.Atoi(rawName[3:])
			if err != nil || int64(n) > size {
				return nil, fmt.Errorf("%s: bad BSD member name at offset %d", path, off)
			}
			name = strings.TrimRight(string(content[:n]), "\x00")
			content = content[n:]
		case strings.HasPrefix(rawName, "/") && len(rawName) > 1: // GNU long name
			i, err := strconv.Atoi(rawName[1:])
			if err != nil || i >= len(longNames) {
				return nil, fmt.Errorf("%s: bad long member name %q at offset %d", path, rawName, off)
			}
			end := bytes.IndexByte(longNames[i:], '\n')
			if end < 0 {
				end = len(longNames) - i
			}
			name = strings.TrimSuffix(string(longNames[i:i+end]), "/")
		default:
			name = strings.TrimSuffix(rawName, "/")
		}
		if !special && rawName != "//" {
			m := Member{Name: name, Offset: off}
			if ar.Thin {
				m.Size = size
				m.Bitcode = classify(ar.memberPath(name)) == KindBitcode
			} else {
				m.Data = content
				m.Size = int64(len(content)) // without a BSD name
				m.Bitcode = isBitcode(content)
			}
			ar.Members = append(ar.Members, m)
		}
		if stored {
			off = body + size
		} else {
			off = body
		}
		if off%2 == 1 {
			off++
		}
	}
	return ar, nil
}

// memberPath is the file a thin archive's member refers to, spelled as the
// linker resolves it: relative to the archive's directory unless absolute.
func (ar *Archive) memberPath(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(ar.Path), name)
}

// HasBitcode reports whether any member is bitcode.
func (ar *Archive) HasBitcode() bool {
	for _, m := range ar.Members {
		if m.Bitcode {
			return true
		}
	}
	return false
}
