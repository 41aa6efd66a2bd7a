package bitcode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// moduleCodeVSTOffset is MODULE_CODE_VSTOFFSET: a bit offset into the
// stream, which moving a block would invalidate. Only regular modules
// (never combined-index shards) carry one.
const moduleCodeVSTOffset = 13

// RewriteModulePaths returns shard with the path of every module-table
// entry m replaced by rename(m), so that a backend running elsewhere finds
// the modules under the names it is given there. Everything else is kept:
// the modids, the recorded module hashes and every other record; only the
// MODULE_STRTAB blocks are written anew, and the bytes outside them are
// copied unchanged, but for the length words of the blocks enclosing them
// (and the wrapper's size field). The changed entries take the narrowest
// encoding among the block's abbreviations (as LLVM's writer does), the
// other records keep their bits.
//
// The result is read back and compared with the input record by record
// before it is returned: a rewrite that would change anything but those
// paths is an error, never a shard. The new paths must be non-empty and
// distinct (the backend finds a module by its path). If no path changes,
// shard itself is returned.
func RewriteModulePaths(shard []byte, rename func(Module) string) ([]byte, error) {
	mods, err := ModuleTable(shard)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(mods))
	owner := map[string]string{} // new path -> old path
	changed := false
	for i, m := range mods {
		p := rename(m)
		if p == "" {
			return nil, fmt.Errorf("module %q: empty new path", m.Path)
		}
		if old, dup := owner[p]; dup && old != m.Path {
			return nil, fmt.Errorf("modules %q and %q would both be named %q", old, m.Path, p)
		}
		owner[p] = m.Path
		paths[i] = p
		changed = changed || p != m.Path
	}
	if !changed {
		return shard, nil
	}
	c, err := unwrap(shard)
	if err != nil {
		return nil, err
	}
	body, err := rewriteTables(c.body, paths)
	if err != nil {
		return nil, err
	}
	out := body
	if c.wrapped {
		off := binary.LittleEndian.Uint32(shard[8:])
		size := binary.LittleEndian.Uint32(shard[12:])
		if uint64(len(body)) > math.MaxUint32 {
			return nil, errorf("rewritten bitcode too large for the wrapper")
		}
		out = slices.Concat(shard[:off], body, shard[off+size:])
		binary.LittleEndian.PutUint32(out[12:], uint32(len(body)))
	}
	if err := verifyRewrite(shard, out, mods, paths); err != nil {
		return nil, fmt.Errorf("bitcode: rewriting the module table: %w", err)
	}
	return out, nil
}

// tableSpan is one MODULE_STRTAB block and its new body.
type tableSpan struct {
	lenWord   uint64   // bit position of the block's length word
	bodyStart uint64   // bit position of its first element
	end       uint64   // bit position after its END_BLOCK's alignment
	parents   []uint64 // length words of the enclosing blocks
	body      []byte   // the new body, END_BLOCK and alignment included
}

// rewriteTables re-emits every MODULE_STRTAB block of the raw bitstream
// body with the i-th ENTRY (in stream order) naming paths[i], and splices
// the new blocks in.
func rewriteTables(body []byte, paths []string) ([]byte, error) {
	var (
		spans   []*tableSpan
		cur     *tableSpan
		w       *bitWriter
		width   uint
		open    []uint64 // length words of the open blocks
		ordinal int
		offsets bool // a MODULE_CODE_VSTOFFSET record was seen
	)
	_, err := walk(container{body: body}, func(ev *event) error {
		switch ev.kind {
		case evEnter:
			if cur != nil {
				return errorf("a subblock inside a module table")
			}
			if ev.blockID == moduleStrtabBlockID {
				cur = &tableSpan{lenWord: ev.end - 32, bodyStart: ev.end, parents: slices.Clone(open)}
				w, width = &bitWriter{}, ev.width
			}
			open = append(open, ev.end-32)
		case evExit:
			open = open[:len(open)-1]
			if cur != nil {
				w.emit(abbrevEndBlock, width)
				w.align()
				cur.end, cur.body = ev.end, w.buf
				spans = append(spans, cur)
				cur = nil
			}
		case evAbbrev:
			if cur != nil {
				return w.copyBits(body, ev.start, ev.end)
			}
		case evRecord:
			if ev.blockID == moduleBlockID && ev.code == moduleCodeVSTOffset {
				offsets = true
			}
			if cur == nil {
				return nil
			}
			if ev.code == mstCodeEntry { // ModuleTable checked its shape
				if ordinal >= len(paths) {
					return errorf("more module-table entries than the table has")
				}
				p := paths[ordinal]
				ordinal++
				ops := make([]uint64, 0, 1+len(p))
				ops = append(ops, ev.ops[0])
				for i := 0; i < len(p); i++ {
					ops = append(ops, uint64(p[i]))
				}
				if !slices.Equal(ops, ev.ops) {
					return w.writeRecord(width, ev.abbrevs, ev.code, ops, nil, false)
				}
			}
			if ev.hasBlob {
				// A blob is 32-bit aligned where it lies: its bits
				// cannot move by any other amount.
				w.abbrevRecord(width, ev.abbrevID, ev.abbrevs[ev.abbrevID-firstUserAbbrev], ev.code, ev.ops, ev.blob)
				return nil
			}
			return w.copyBits(body, ev.start, ev.end)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ordinal != len(paths) {
		return nil, errorf("%d module-table entries, %d expected", ordinal, len(paths))
	}
	if offsets && len(spans) > 0 {
		return nil, errorf("a module with a value symbol table offset and a module table: not an index shard")
	}
	out := slices.Clone(body)
	// Last block first: a splice moves only what follows it, and every
	// length word patched here lies before it.
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		oldWords := int64(s.end-s.bodyStart) / 32
		newWords := int64(len(s.body)) / 4
		if err := addToWord(out, s.lenWord, newWords-oldWords); err != nil {
			return nil, err
		}
		for _, p := range s.parents {
			if err := addToWord(out, p, newWords-oldWords); err != nil {
				return nil, err
			}
		}
		out = slices.Concat(out[:s.bodyStart/8], s.body, out[s.end/8:])
	}
	return out, nil
}

// addToWord adds delta to the 32-bit length word at bit position pos.
func addToWord(b []byte, pos uint64, delta int64) error {
	v := int64(binary.LittleEndian.Uint32(b[pos/8:])) + delta
	if v < 0 || v > math.MaxUint32 {
		return errorf("block length %d out of range after the rewrite", v)
	}
	binary.LittleEndian.PutUint32(b[pos/8:], uint32(v))
	return nil
}

// verifyRewrite reads the rewritten shard back and checks that it decodes
// to the old one's events but for the module paths, which must be paths.
func verifyRewrite(oldShard, newShard []byte, mods []Module, paths []string) error {
	events := func(shard []byte) ([]heldEvent, int, container, error) {
		c, err := unwrap(shard)
		if err != nil {
			return nil, 0, c, err
		}
		var evs []heldEvent
		trailing, err := walk(c, func(ev *event) error {
			evs = append(evs, hold(ev))
			return nil
		})
		return evs, trailing, c, err
	}
	oldEvs, oldTrail, oldC, err := events(oldShard)
	if err != nil {
		return err
	}
	newEvs, newTrail, newC, err := events(newShard)
	if err != nil {
		return fmt.Errorf("the result does not read back: %w", err)
	}
	if oldTrail != newTrail || oldC.wrapped != newC.wrapped || oldC.cpuType != newC.cpuType || !bytes.Equal(oldC.outside, newC.outside) {
		return fmt.Errorf("the container changed")
	}
	if len(oldEvs) != len(newEvs) {
		return fmt.Errorf("%d elements read back, %d expected", len(newEvs), len(oldEvs))
	}
	ordinal := 0
	for i := range oldEvs {
		o, n := oldEvs[i], newEvs[i]
		if o.kind == evRecord && o.blockID == moduleStrtabBlockID && o.code == mstCodeEntry {
			if len(o.ops) == 0 || ordinal >= len(paths) {
				return fmt.Errorf("module-table entry %d malformed", ordinal)
			}
			o.ops = []uint64{o.ops[0]}
			for j := 0; j < len(paths[ordinal]); j++ {
				o.ops = append(o.ops, uint64(paths[ordinal][j]))
			}
			ordinal++
		}
		if o.kind != n.kind || o.blockID != n.blockID || o.depth != n.depth || o.code != n.code ||
			!slices.Equal(o.abbrev, n.abbrev) || !slices.Equal(o.ops, n.ops) ||
			o.hasBlob != n.hasBlob || !bytes.Equal(o.blob, n.blob) {
			return fmt.Errorf("element %d reads back differently", i)
		}
	}
	got, err := ModuleTable(newShard)
	if err != nil {
		return err
	}
	if len(got) != len(mods) {
		return fmt.Errorf("%d modules read back, %d expected", len(got), len(mods))
	}
	for i, m := range got {
		if m.ID != mods[i].ID || m.Hash != mods[i].Hash || m.Path != paths[i] {
			return fmt.Errorf("module %d reads back as %d %q, want %d %q", i, m.ID, m.Path, mods[i].ID, paths[i])
		}
	}
	return nil
}
