package bitcode

import (
	"errors"
)

// Block ids and record codes of a module (as opposed to an index shard).
const (
	moduleBlockID       = 8
	metadataBlockID     = 15
	moduleCodeTriple    = 2
	metadataCodeNode    = 3
	metadataCodeStrings = 35
)

// ModuleInfo is what a ThinLTO backend must be told about a module to
// compile it as the linker's in-process LTO does: lld creates each module's
// target machine from the module's own triple, and for a relocatable (-r)
// link from the module's "PIC Level" flag (PIC when present, static
// otherwise), while clang compiling IR uses its own default triple and
// relocation model unless told.
type ModuleInfo struct {
	Triple string // the module's target triple, "" if it names none
	PIC    bool   // it has a "PIC Level" module flag
}

var errStop = errors.New("stop walking")

// ReadModuleInfo reads the target triple and the PIC Level module flag of
// the first module in a bitcode file. It decodes only the module block's own
// records and its module-level metadata; function bodies, constants and
// the symbol and string tables are skipped by their length.
func ReadModuleInfo(data []byte) (ModuleInfo, error) {
	return readModuleInfo(data, true)
}

// ReadTriple reads the target triple of the first module in a bitcode
// file. The triple comes before the module's globals, constants and
// metadata, so this decodes a small part of what ReadModuleInfo does (a
// module with many globals has many records before its module flags).
func ReadTriple(data []byte) (string, error) {
	info, err := readModuleInfo(data, false)
	return info.Triple, err
}

// readModuleInfo reads the triple, and if pic is set the PIC Level flag.
func readModuleInfo(data []byte, pic bool) (ModuleInfo, error) {
	var info ModuleInfo
	c, err := unwrap(data)
	if err != nil {
		return info, err
	}
	picString := -1 // metadata id of the string "PIC Level"
	sawModule := false
	_, err = walk(c, func(ev *event) error {
		switch ev.kind {
		case evEnter:
			switch {
			case ev.depth == 1 && ev.blockID == moduleBlockID:
				if sawModule {
					return errSkipBlock // a second module: the first one decides
				}
				sawModule = true
				return nil
			case ev.blockID == blockInfoBlockID:
				return nil // abbreviations the metadata block may use
			case ev.depth == 2 && ev.blockID == metadataBlockID:
				return nil
			}
			return errSkipBlock
		case evExit:
			if ev.depth == 1 && ev.blockID == moduleBlockID {
				return errStop
			}
		case evRecord:
			switch {
			case ev.depth == 1 && ev.blockID == moduleBlockID && ev.code == moduleCodeTriple:
				b := make([]byte, 0, len(ev.ops))
				for _, v := range ev.ops {
					if v > 0xFF {
						return errorf("triple character %d out of range", v)
					}
					b = append(b, byte(v))
				}
				info.Triple = string(b)
				if !pic {
					return errStop
				}
			case ev.blockID == metadataBlockID && ev.code == metadataCodeStrings:
				// Module-level strings take the first metadata ids.
				i, err := indexOfString(ev, "PIC Level")
				if err != nil {
					return err
				}
				if i >= 0 {
					picString = i
				}
			case ev.blockID == metadataBlockID && ev.code == metadataCodeNode:
				// A module flag is a tuple {behaviour, !"name", value};
				// node operands are metadata ids plus one.
				if picString >= 0 && len(ev.ops) == 3 && ev.ops[1] == uint64(picString)+1 {
					info.PIC = true
				}
			}
		}
		return nil
	})
	if err != nil && err != errStop {
		return info, err
	}
	if !sawModule {
		return info, errorf("no module block")
	}
	return info, nil
}

// indexOfString returns the index of s among the strings of a
// METADATA_STRINGS record ([count, offset] and a blob holding count vbr6
// lengths, then at offset the characters), or -1.
func indexOfString(ev *event, s string) (int, error) {
	if len(ev.ops) != 2 || !ev.hasBlob {
		return 0, errorf("METADATA_STRINGS record with %d operands", len(ev.ops))
	}
	count, offset := ev.ops[0], ev.ops[1]
	if offset > uint64(len(ev.blob)) {
		return 0, errorf("METADATA_STRINGS offset %d beyond its %d bytes", offset, len(ev.blob))
	}
	lengths := &bitReader{data: ev.blob, end: offset * 8}
	chars := ev.blob[offset:]
	for i := uint64(0); i < count; i++ {
		n, err := lengths.readVBR(6)
		if err != nil {
			return 0, err
		}
		if n > uint64(len(chars)) {
			return 0, errorf("METADATA_STRINGS string %d overruns the record", i)
		}
		if string(chars[:n]) == s {
			return int(i), nil
		}
		chars = chars[n:]
	}
	return -1, nil
}
