package bitcode

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
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
	pending    Module // held until its HASH record, if one follows
	hasPending bool
}

func (t *tableBuilder) flush(emit func(Module) error) error {
	if !t.hasPending {
		return nil
	}
	t.hasPending = false
	return emit(t.pending)
}

func (t *tableBuilder) add(ev *event, emit func(Module) error) error {
	inMST := ev.kind == evRecord && ev.blockID == moduleStrtabBlockID
	if inMST && ev.code == mstCodeHash {
		if !t.hasPending {
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
		b.Grow(len(ev.ops) - 1)
		for _, v := range ev.ops[1:] {
			if v > 0xFF {
				return errorf("MST ENTRY character %d out of range", v)
			}
			b.WriteByte(byte(v))
		}
		t.pending, t.hasPending = Module{ID: ev.ops[0], Path: b.String()}, true
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
	tagCanonical = 'K' // module table and summary rendered without ids
	keyHash      = 'h'
	keyPath      = 'p'
	keyHashPath  = 'b'
)

const digestDomain = "thindist/bitcode.NormalizedDigest/v3\x00"

// NormalizedDigest returns a SHA-256 over a canonical rendering of the
// shard's decoded record stream in which the path of every module-table
// entry is replaced by the module's content hash. See the package
// documentation for exactly what is kept and why that is safe. Malformed
// input yields an error wrapping ErrFormat.
func NormalizedDigest(shard []byte) ([32]byte, error) {
	_, sum, err := TableAndDigest(shard)
	return sum, err
}

// TableAndDigest returns both ModuleTable(shard) and
// NormalizedDigest(shard), decoding the shard twice instead of four times
// (a cache key needs both, for every backend).
func TableAndDigest(shard []byte) ([]Module, [32]byte, error) {
	var sum [32]byte
	c, err := unwrap(shard)
	if err != nil {
		return nil, sum, err
	}
	sc := scratches.Get().(*scratch)
	defer sc.put()

	// First pass: the module table, and the summary block, canonicalised
	// if canonicalSummary can (and then the module table is rendered
	// without modids, as a sorted set of identities, the modids in the
	// summaries being replaced by the identities too).
	mods, summaries, err := sc.readTableAndSummary(c, len(shard))
	if err != nil {
		return nil, sum, err
	}
	// A non-zero hash identifies a module only if no other entry shares it.
	count := map[[5]uint32]int{}
	for _, m := range mods {
		if m.HasHash() {
			count[m.Hash]++
		}
	}
	idents, identsOK := moduleIdents(mods, count)

	var canon []byte
	canonOK := false
	if summaries == 1 && identsOK {
		canon, canonOK = sc.summary.canonical(sc.held, idents)
	}

	sum, err = sc.digest(c, count, idents, canon, canonOK)
	if err != nil {
		return nil, sum, err
	}
	return mods, sum, nil
}

// readTableAndSummary is TableAndDigest's first walk over c: it returns
// the module table, holds the events of the summary blocks in sc.held and
// counts those blocks. sc.held is left as it was when the walk fails.
func (sc *scratch) readTableAndSummary(c container, shardSize int) (mods []Module, summaries int, err error) {
	tb := &tableBuilder{}
	held, arena := sc.held[:0], &sc.arena
	// A summary block holds about one event per 15 bytes of shard: sized
	// for that at once, a main module's (thousands of imports) is not
	// grown and copied a dozen times over.
	held = slices.Grow(held, shardSize/12)
	holding, holdDepth := false, 0
	if _, err := walkWith(c, &sc.walk, func(ev *event) error {
		if err := tb.add(ev, func(m Module) error {
			mods = append(mods, m)
			return nil
		}); err != nil {
			return err
		}
		switch {
		case holding && ev.kind == evExit && ev.blockID == globalValSummaryBlockID && ev.depth == holdDepth:
			holding = false
			summaries++
		case holding:
			held = append(held, arena.hold(ev))
		case ev.kind == evEnter && ev.blockID == globalValSummaryBlockID:
			holding, holdDepth = true, ev.depth
		}
		return nil
	}); err != nil {
		return nil, 0, err
	}
	sc.held = held // to be reused, however far it grew
	return mods, summaries, nil
}

// digest is TableAndDigest's second walk over c: the hash of the rendering
// NormalizedDigest documents. When canonOK, the summary block is rendered
// as canon and the module table as the sorted set of its modules'
// identities (idents, by modid); otherwise every event is rendered as it
// is, modules by modid and identity (count: how many entries share each
// hash).
func (sc *scratch) digest(c container, count map[[5]uint32]int, idents map[uint64][]byte, canon []byte, canonOK bool) ([32]byte, error) {
	d := &digester{h: sha256.New(), out: sc.out[:0]}
	defer func() { sc.out = d.out }()
	d.write([]byte(digestDomain))
	d.tag(tagContainer)
	if c.wrapped {
		d.uint(1)
		d.uint(uint64(c.cpuType))
		d.bytes(c.outside)
	} else {
		d.uint(0)
	}
	if canonOK {
		d.tag(tagCanonical)
	}

	t := &tableBuilder{}
	var table [][]byte // canonOK: identities of the current MST block
	emitModule := func(m Module) error {
		if canonOK {
			table = append(table, idents[m.ID])
			return nil
		}
		d.tag(tagModule)
		d.uint(m.ID)
		d.write(identOf(m, count))
		return nil
	}
	// The first walk's events (held) are not read again: its buffers
	// serve this one.
	trailing, err := walkWith(c, &sc.walk, func(ev *event) error {
		if err := t.add(ev, emitModule); err != nil {
			return err
		}
		if canonOK && ev.kind == evEnter && ev.blockID == globalValSummaryBlockID {
			// The block's canonical rendering stands for its content,
			// which this walk jumps over rather than decode again (most
			// of a shard's bytes; see docs/design.md, "Shard digests").
			// Its exit is rendered as the walk would have.
			d.event(ev)
			d.tag(tagSummary)
			d.bytes(canon)
			d.tag(tagExit)
			return errSkipBlock
		}
		if canonOK && ev.kind == evExit && ev.blockID == moduleStrtabBlockID {
			sort.Slice(table, func(i, j int) bool { return bytes.Compare(table[i], table[j]) < 0 })
			d.tag(tagModule)
			d.uint(uint64(len(table)))
			for _, id := range table {
				d.bytes(id)
			}
			table = nil
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
		return [32]byte{}, err
	}
	d.tag(tagTrailing)
	d.uint(uint64(trailing))
	return d.sum(), nil
}

// scratch is what TableAndDigest needs only while it runs: kept for the
// next call (a shard's held events and their operands were most of the
// key's allocations, and so of the garbage thindist makes per action).
type scratch struct {
	held    []heldEvent
	arena   holdArena
	out     []byte
	summary summaryScratch
	walk    walkBuffers
}

var scratches = sync.Pool{New: func() any { return &scratch{out: make([]byte, 0, 4096)} }}

func (sc *scratch) put() {
	clear(sc.held) // no stale references into the shard
	sc.held = sc.held[:0]
	sc.arena.reset()
	sc.summary.reset()
	scratches.Put(sc)
}

// moduleIdents renders each module's identity without its modid: its
// content hash when that identifies it, else (also) its path. ok is false
// when modids or identities repeat.
func moduleIdents(mods []Module, count map[[5]uint32]int) (idents map[uint64][]byte, ok bool) {
	idents = make(map[uint64][]byte, len(mods))
	seen := make(map[string]bool, len(mods))
	ok = true
	for _, m := range mods {
		id := identOf(m, count)
		if _, dup := idents[m.ID]; dup || seen[string(id)] {
			ok = false
		}
		idents[m.ID] = id
		seen[string(id)] = true
	}
	return idents, ok
}

// identOf renders module m's identity without its modid.
func identOf(m Module, count map[[5]uint32]int) []byte {
	d := &digester{out: make([]byte, 0, 1+20+binary.MaxVarintLen64+len(m.Path))}
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
	return d.out
}

// digester renders the framed fields it is given into out and, when h is
// set, feeds them to h in chunks (a call of h per field, and the one-byte
// slice each tag made escape, was most of a shard's cost). Without h, out
// is the rendering.
type digester struct {
	h   hash.Hash
	out []byte
}

// digestChunk is how much rendering waits in out before it goes to h.
const digestChunk = 16 << 10

func (d *digester) spill() {
	if d.h != nil && len(d.out) >= digestChunk {
		d.h.Write(d.out)
		d.out = d.out[:0]
	}
}

// sum feeds what is left to h and returns the digest.
func (d *digester) sum() [32]byte {
	d.h.Write(d.out)
	d.out = d.out[:0]
	var s [32]byte
	copy(s[:], d.h.Sum(nil))
	return s
}

func (d *digester) write(b []byte) {
	d.out = append(d.out, b...)
	d.spill()
}

func (d *digester) tag(b byte) {
	d.out = append(d.out, b)
	d.spill()
}

func (d *digester) uint(v uint64) {
	d.out = binary.AppendUvarint(d.out, v)
	d.spill()
}

func (d *digester) bytes(b []byte) {
	d.uint(uint64(len(b)))
	d.write(b)
}

func (d *digester) hash(h [5]uint32) {
	for _, w := range h {
		d.out = binary.BigEndian.AppendUint32(d.out, w)
	}
	d.spill()
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
