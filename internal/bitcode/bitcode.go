package bitcode

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"strings"
)

// Module is one entry of a shard's module string table.
type Module struct {
	ID   uint64    // modid operand of MST_CODE_ENTRY; summaries refer to it
	Path string    // path string as given to the linker
	Hash [5]uint32 // MST_CODE_HASH, all zero if absent
}

// HasHash reports whether the module has a non-zero content hash.
func (m Module) HasHash() bool { return m.Hash != [5]uint32{} }

// ModuleTable returns the modules named by the shard's MODULE_STRTAB blocks,
// in table order.
func ModuleTable(shard []byte) ([]Module, error) {
	c, err := unwrap(shard)
	if err != nil {
		return nil, err
	}
	var mods []Module
	t := &tableBuilder{}
	_, err = walk(c, func(ev *event) error {
		return t.add(ev, func(m Module) error {
			mods = append(mods, m)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return mods, nil
}

// tableBuilder pairs MST_CODE_ENTRY records with the MST_CODE_HASH record
// that follows them. It sees every event so that an ENTRY is flushed as soon
// as anything other than its HASH comes next.
type tableBuilder struct {
	pending *Module
}

func (t *tableBuilder) flush(emit func(Module) error) error {
	if t.pending == nil {
		return nil
	}
	m := *t.pending
	t.pending = nil
	return emit(m)
}

func (t *tableBuilder) add(ev *event, emit func(Module) error) error {
	inMST := ev.kind == evRecord && ev.blockID == moduleStrtabBlockID
	if inMST && ev.code == mstCodeHash {
		if t.pending == nil {
			return errorf("MST HASH record does not follow an ENTRY")
		}
		if len(ev.ops) != 5 || ev.hasBlob {
			return errorf("MST HASH record with %d operands", len(ev.ops))
		}
		for i, v := range ev.ops {
			if v > 0xFFFFFFFF {
				return errorf("MST HASH operand %d out of range", v)
			}
			t.pending.Hash[i] = uint32(v)
		}
		return t.flush(emit)
	}
	if err := t.flush(emit); err != nil {
		return err
	}
	if inMST && ev.code == mstCodeEntry {
		if len(ev.ops) < 1 || ev.hasBlob {
			return errorf("MST ENTRY record without modid")
		}
		var b strings.Builder
		for _, v := range ev.ops[1:] {
			if v > 0xFF {
				return errorf("MST ENTRY character %d out of range", v)
			}
			b.WriteByte(byte(v))
		}
		t.pending = &Module{ID: ev.ops[0], Path: b.String()}
	}
	return nil
}

// Tags of the canonical rendering hashed by NormalizedDigest.
const (
	tagContainer = 'C'
	tagEnter     = 'B'
	tagExit      = 'E'
	tagAbbrev    = 'A'
	tagRecord    = 'R'
	tagModule    = 'M'
	tagTrailing  = 'T'
	tagSummary   = 'S' // a canonicalised combined summary block
	keyHash      = 'h'
	keyPath      = 'p'
	keyHashPath  = 'b'
)

const digestDomain = "thindist/bitcode.NormalizedDigest/v2\x00"

// NormalizedDigest returns a SHA-256 over a canonical rendering of the
// shard's decoded record stream in which the path of every module-table
// entry is replaced by the module's content hash. See the package
// documentation for exactly what is kept and why that is safe. Malformed
// input yields an error wrapping ErrFormat.
func NormalizedDigest(shard []byte) ([32]byte, error) {
	var sum [32]byte
	mods, err := ModuleTable(shard)
	if err != nil {
		return sum, err
	}
	// A non-zero hash identifies a module only if no other entry shares it.
	count := map[[5]uint32]int{}
	for _, m := range mods {
		if m.HasHash() {
			count[m.Hash]++
		}
	}

	c, err := unwrap(shard)
	if err != nil {
		return sum, err
	}
	d := &digester{h: sha256.New()}
	d.h.Write([]byte(digestDomain))
	d.tag(tagContainer)
	if c.wrapped {
		d.uint(1)
		d.uint(uint64(c.cpuType))
		d.bytes(c.outside)
	} else {
		d.uint(0)
	}

	t := &tableBuilder{}
	emitModule := func(m Module) error {
		d.tag(tagModule)
		d.uint(m.ID)
		switch {
		case !m.HasHash():
			d.tag(keyPath)
			d.bytes([]byte(m.Path))
		case count[m.Hash] > 1:
			d.tag(keyHashPath)
			d.hash(m.Hash)
			d.bytes([]byte(m.Path))
		default:
			d.tag(keyHash)
			d.hash(m.Hash)
		}
		return nil
	}
	// The summary block is held back and rendered whole at its end, by
	// canonicalSummary if it can.
	var held []heldEvent
	holding, holdDepth := false, 0
	trailing, err := walk(c, func(ev *event) error {
		if err := t.add(ev, emitModule); err != nil {
			return err
		}
		if holding {
			if ev.kind == evExit && ev.blockID == globalValSummaryBlockID && ev.depth == holdDepth {
				holding = false
				if canon, ok := canonicalSummary(held); ok {
					d.tag(tagSummary)
					d.bytes(canon)
				} else {
					for i := range held {
						d.event(held[i].event())
					}
				}
				held = nil
				d.event(ev)
				return nil
			}
			held = append(held, hold(ev))
			return nil
		}
		if ev.kind == evEnter && ev.blockID == globalValSummaryBlockID {
			holding, holdDepth = true, ev.depth
			d.event(ev)
			return nil
		}
		if ev.kind == evRecord && ev.blockID == moduleStrtabBlockID &&
			(ev.code == mstCodeEntry || ev.code == mstCodeHash) {
			// Rendered by emitModule, which covers ENTRY and its HASH.
			return nil
		}
		d.event(ev)
		return nil
	})
	if err != nil {
		return sum, err
	}
	if holding {
		return sum, errorf("summary block not closed")
	}
	d.tag(tagTrailing)
	d.uint(uint64(trailing))
	copy(sum[:], d.h.Sum(nil))
	return sum, nil
}

type digester struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (d *digester) tag(b byte) { d.h.Write([]byte{b}) }

func (d *digester) uint(v uint64) {
	n := binary.PutUvarint(d.buf[:], v)
	d.h.Write(d.buf[:n])
}

func (d *digester) bytes(b []byte) {
	d.uint(uint64(len(b)))
	d.h.Write(b)
}

func (d *digester) hash(h [5]uint32) {
	var b [20]byte
	for i, w := range h {
		binary.BigEndian.PutUint32(b[4*i:], w)
	}
	d.h.Write(b[:])
}

func (d *digester) event(ev *event) {
	switch ev.kind {
	case evEnter:
		d.tag(tagEnter)
		d.uint(ev.blockID)
	case evExit:
		d.tag(tagExit)
	case evAbbrev:
		d.tag(tagAbbrev)
		d.uint(uint64(len(ev.abbrev)))
		for _, op := range ev.abbrev {
			d.uint(uint64(op.enc))
			d.uint(op.val)
		}
	case evRecord:
		d.tag(tagRecord)
		d.uint(ev.blockID)
		d.uint(ev.code)
		d.uint(uint64(len(ev.ops)))
		for _, v := range ev.ops {
			d.uint(v)
		}
		if ev.hasBlob {
			d.uint(1)
			d.bytes(ev.blob)
		} else {
			d.uint(0)
		}
	}
}

// Dump writes a readable listing of the decoded stream to w: one line per
// block entry/exit, abbreviation definition and record, plus the module
// table. It is meant for debugging cache misses; the format is not stable.
func Dump(w io.Writer, data []byte) error {
	c, err := unwrap(data)
	if err != nil {
		return err
	}
	if c.wrapped {
		fmt.Fprintf(w, "wrapper cputype=%#x\n", c.cpuType)
	}
	t := &tableBuilder{}
	trailing, err := walk(c, func(ev *event) error {
		indent := strings.Repeat("  ", ev.depth-1)
		switch ev.kind {
		case evEnter:
			fmt.Fprintf(w, "%s<block %d>\n", indent, ev.blockID)
		case evExit:
			fmt.Fprintf(w, "%s</block %d>\n", indent, ev.blockID)
		case evAbbrev:
			fmt.Fprintf(w, "%s  abbrev %v\n", indent, ev.abbrev)
		case evRecord:
			fmt.Fprintf(w, "%s  record code=%d ops=%v", indent, ev.code, ev.ops)
			if ev.hasBlob {
				fmt.Fprintf(w, " blob=%q", ev.blob)
			}
			fmt.Fprintln(w)
		}
		return t.add(ev, func(m Module) error {
			_, err := fmt.Fprintf(w, "%s  # module %d %q hash=%08x\n", indent, m.ID, m.Path, m.Hash)
			return err
		})
	})
	if err != nil {
		return err
	}
	if trailing > 0 {
		fmt.Fprintf(w, "trailing zero bytes: %d\n", trailing)
	}
	return nil
}
