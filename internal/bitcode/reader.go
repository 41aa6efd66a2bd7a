package bitcode

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Builtin abbreviation ids.
const (
	abbrevEndBlock      = 0
	abbrevEnterSubblock = 1
	abbrevDefine        = 2
	abbrevUnabbrev      = 3
	firstUserAbbrev     = 4
)

// Well-known block ids and record codes.
const (
	blockInfoBlockID    = 0
	blockInfoSetBID     = 1
	moduleStrtabBlockID = 19
	mstCodeEntry        = 1
	mstCodeHash         = 2
)

const (
	wrapperMagic = 0x0B17C0DE
	maxDepth     = 64
)

// Operand encodings of an abbreviation.
const (
	encLiteral = 0
	encFixed   = 1
	encVBR     = 2
	encArray   = 3
	encChar6   = 4
	encBlob    = 5
)

// ErrFormat is wrapped by every error reporting malformed input.
var ErrFormat = errors.New("bitcode: malformed input")

// errSkipBlock, returned by walk's callback for an evEnter, skips the block.
var errSkipBlock = errors.New("skip this block")

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

type abbrevOp struct {
	enc uint8
	val uint64 // literal value or fixed/vbr width
}

type abbrev []abbrevOp

// bitReader reads little-endian bit fields, LLVM style (low bits first).
type bitReader struct {
	data []byte
	pos  uint64 // bit position
	end  uint64 // bit limit
}

func (r *bitReader) remaining() uint64 { return r.end - r.pos }

func (r *bitReader) read(n uint) (uint64, error) {
	if n > 64 {
		return 0, errorf("field width %d", n)
	}
	if uint64(n) > r.remaining() {
		return 0, errorf("unexpected end of stream at bit %d", r.pos)
	}
	byteIdx := r.pos >> 3
	if n <= 56 && byteIdx+8 <= uint64(len(r.data)) {
		// The field is within the 8 bytes from its first: one load.
		w := binary.LittleEndian.Uint64(r.data[byteIdx:])
		bit := r.pos & 7
		r.pos += uint64(n)
		return (w >> bit) & (1<<n - 1), nil
	}
	var v uint64
	for i := uint(0); i < n; {
		byteIdx := r.pos >> 3
		bit := uint(r.pos & 7)
		take := 8 - bit
		if take > n-i {
			take = n - i
		}
		chunk := (uint64(r.data[byteIdx]) >> bit) & (1<<take - 1)
		v |= chunk << i
		i += take
		r.pos += uint64(take)
	}
	return v, nil
}

func (r *bitReader) readVBR(n uint) (uint64, error) {
	if n < 2 || n > 32 {
		return 0, errorf("vbr width %d", n)
	}
	hi := uint64(1) << (n - 1)
	if byteIdx := r.pos >> 3; byteIdx+8 <= uint64(len(r.data)) {
		// The pieces within the 57 or more bits from the field's first
		// byte, from one load; a value that goes on past them is read
		// again below, from its start. Fewer than 64 data bits: no
		// overflow to check.
		bit := uint(r.pos & 7)
		w := binary.LittleEndian.Uint64(r.data[byteIdx:]) >> bit
		avail := min(uint64(64-bit), r.remaining())
		var v uint64
		var shift, used uint
		for uint64(used+n) <= avail {
			piece := w & (hi<<1 - 1)
			w >>= n
			used += n
			v |= (piece & (hi - 1)) << shift
			if piece&hi == 0 {
				r.pos += uint64(used)
				return v, nil
			}
			shift += n - 1
		}
	}
	var v uint64
	var shift uint
	for {
		piece, err := r.read(n)
		if err != nil {
			return 0, err
		}
		data := piece & (hi - 1)
		if shift >= 64 || (shift > 0 && data>>(64-shift) != 0) {
			return 0, errorf("vbr value overflows 64 bits at bit %d", r.pos)
		}
		v |= data << shift
		if piece&hi == 0 {
			return v, nil
		}
		shift += n - 1
	}
}

func (r *bitReader) align32() error {
	p := (r.pos + 31) &^ 31
	if p > r.end {
		return errorf("unexpected end of stream while aligning")
	}
	r.pos = p
	return nil
}

// eventKind enumerates what walk reports.
type eventKind int

const (
	evEnter eventKind = iota
	evExit
	evAbbrev
	evRecord
)

// event is one decoded element of the stream. Slices are only valid during
// the callback.
type event struct {
	kind    eventKind
	blockID uint64   // block the event belongs to (evEnter: the new block)
	depth   int      // nesting depth of blockID, top-level blocks are 1
	abbrev  abbrev   // evAbbrev
	code    uint64   // evRecord
	ops     []uint64 // evRecord
	blob    []byte   // evRecord, when hasBlob
	hasBlob bool
	// start and end are the event's bit positions in the raw bitcode:
	// from its abbreviation id to the end of the record, definition or
	// block header (evEnter: after the length word; evExit: after the
	// alignment).
	start, end uint64
	// evRecord: the abbreviation the record was read with (id >=
	// firstUserAbbrev) or abbrevUnabbrev, and every abbreviation in scope.
	abbrevID uint64
	abbrevs  []abbrev
	// evEnter: the abbreviation id width of the new block.
	width uint
}

type scope struct {
	blockID uint64
	width   uint
	end     uint64 // bit position after the block's END_BLOCK
	abbrevs []abbrev
}

// container describes where the raw bitcode lies inside the file.
type container struct {
	wrapped bool
	cpuType uint32
	outside []byte // bytes of the file outside the raw bitcode (wrapper case)
	body    []byte
}

func unwrap(data []byte) (container, error) {
	var c container
	if len(data) >= 4 && binary.LittleEndian.Uint32(data) == wrapperMagic {
		if len(data) < 20 {
			return c, errorf("short wrapper header")
		}
		off := uint64(binary.LittleEndian.Uint32(data[8:]))
		size := uint64(binary.LittleEndian.Uint32(data[12:]))
		if off < 20 || off+size > uint64(len(data)) {
			return c, errorf("wrapper offset %d size %d outside file of %d bytes", off, size, len(data))
		}
		c.wrapped = true
		c.cpuType = binary.LittleEndian.Uint32(data[16:])
		c.outside = append(append([]byte(nil), data[20:off]...), data[off+size:]...)
		data = data[off : off+size]
	}
	if len(data) < 4 || data[0] != 'B' || data[1] != 'C' || data[2] != 0xC0 || data[3] != 0xDE {
		return c, errorf("missing 'BC' 0xC0DE magic")
	}
	c.body = data
	return c, nil
}

// walk decodes the bitstream in c.body and calls fn for every event. It
// returns the number of trailing all-zero bytes after the last top-level
// block.
func walk(c container, fn func(*event) error) (trailing int, err error) {
	return walkWith(c, &walkBuffers{}, fn)
}

// walkBuffers hold what a walk allocates besides its events: the
// abbreviations' operands, the block stack, a record's operands. A caller
// that walks once per action (TableAndDigest, twice) keeps them between
// walks, rather than allocating them anew for each (see docs/design.md,
// "Shard digests"). Whatever a walk's events
// point into (an abbreviation, ev.abbrevs, ev.ops) is overwritten by the
// next walk with the same buffers.
type walkBuffers struct {
	chunks [][]abbrevOp // the operands' chunks, filled in order
	used   int          // chunks handed out in this walk
	defs   []abbrevOp   // the chunk being filled
	stack  []scope
	ops    []uint64
	// blockInfo holds BLOCKINFO's abbreviations, per block ID.
	blockInfo map[uint64][]abbrev
}

// reset readies b for a new walk.
func (b *walkBuffers) reset() {
	b.used, b.defs = 0, nil
	b.stack = b.stack[:0]
	if b.blockInfo == nil {
		b.blockInfo = map[uint64][]abbrev{}
	}
	for id, as := range b.blockInfo {
		b.blockInfo[id] = as[:0]
	}
}

// chunk makes the next operand chunk, of room for n at least, the one
// being filled. Abbreviations already read keep the previous one.
func (b *walkBuffers) chunk(n int) {
	if b.used < len(b.chunks) && cap(b.chunks[b.used]) >= n {
		b.defs = b.chunks[b.used][:0]
	} else {
		b.defs = make([]abbrevOp, 0, max(n, 512))
		if b.used < len(b.chunks) {
			b.chunks[b.used] = b.defs
		} else {
			b.chunks = append(b.chunks, b.defs)
		}
	}
	b.used++
}

// walkWith is walk using (and keeping) the buffers b.
func walkWith(c container, b *walkBuffers, fn func(*event) error) (trailing int, err error) {
	r := &bitReader{data: c.body, pos: 32, end: uint64(len(c.body)) * 8}
	b.reset()
	blockInfo := b.blockInfo
	stack := b.stack
	defer func() { b.stack = stack[:0] }()
	ev := &event{}
	ops := b.ops[:0]
	defer func() { b.ops = ops[:0] }()
	curBID := int64(-1) // SETBID target inside BLOCKINFO
	sawBlock := false

	for {
		if len(stack) == 0 {
			if r.pos%32 != 0 {
				return 0, errorf("top level not aligned")
			}
			if r.remaining() == 0 && sawBlock {
				return 0, nil
			}
			// Tolerate zero padding after the last block (it can never
			// start a block: the top-level id would be END_BLOCK).
			rest := c.body[r.pos/8:]
			allZero := true
			for _, b := range rest {
				if b != 0 {
					allZero = false
					break
				}
			}
			if allZero && sawBlock {
				return len(rest), nil
			}
		}
		width := uint(2)
		if len(stack) > 0 {
			width = stack[len(stack)-1].width
		}
		start := r.pos
		id, err := r.read(width)
		if err != nil {
			return 0, err
		}
		if len(stack) == 0 && id != abbrevEnterSubblock {
			return 0, errorf("top-level abbrev id %d is not ENTER_SUBBLOCK", id)
		}
		switch id {
		case abbrevEndBlock:
			top := stack[len(stack)-1]
			if err := r.align32(); err != nil {
				return 0, err
			}
			if r.pos != top.end {
				return 0, errorf("block %d ends at bit %d, header says %d", top.blockID, r.pos, top.end)
			}
			stack = stack[:len(stack)-1]
			*ev = event{kind: evExit, blockID: top.blockID, depth: len(stack) + 1, start: start, end: r.pos}
			if err := fn(ev); err != nil {
				return 0, err
			}
		case abbrevEnterSubblock:
			bid, err := r.readVBR(8)
			if err != nil {
				return 0, err
			}
			w, err := r.readVBR(4)
			if err != nil {
				return 0, err
			}
			if w < 1 || w > 32 {
				return 0, errorf("abbrev width %d for block %d", w, bid)
			}
			if err := r.align32(); err != nil {
				return 0, err
			}
			words, err := r.read(32)
			if err != nil {
				return 0, err
			}
			if words*32 > r.remaining() {
				return 0, errorf("block %d claims %d words, %d bits left", bid, words, r.remaining())
			}
			if len(stack) > 0 && stack[len(stack)-1].blockID == blockInfoBlockID {
				return 0, errorf("subblock inside BLOCKINFO")
			}
			if len(stack) >= maxDepth {
				return 0, errorf("blocks nested deeper than %d", maxDepth)
			}
			// The scope's abbreviation list reuses the one a block at
			// this depth had (this walk's or an earlier one's).
			var reuse []abbrev
			if len(stack) < cap(stack) {
				reuse = stack[:len(stack)+1][len(stack)].abbrevs[:0]
			}
			s := scope{blockID: bid, width: uint(w), end: r.pos + words*32}
			s.abbrevs = append(reuse, blockInfo[bid]...)
			stack = append(stack, s)
			sawBlock = true
			if bid == blockInfoBlockID {
				curBID = -1
			}
			*ev = event{kind: evEnter, blockID: bid, depth: len(stack), start: start, end: r.pos, width: uint(w)}
			if err := fn(ev); err == errSkipBlock {
				// The caller needs nothing inside: jump over it by its
				// length, with no evExit.
				r.pos = s.end
				stack = stack[:len(stack)-1]
			} else if err != nil {
				return 0, err
			}
		case abbrevDefine:
			a, err := readAbbrevDef(r, b)
			if err != nil {
				return 0, err
			}
			top := &stack[len(stack)-1]
			if top.blockID == blockInfoBlockID {
				if curBID < 0 {
					return 0, errorf("DEFINE_ABBREV in BLOCKINFO before SETBID")
				}
				blockInfo[uint64(curBID)] = append(blockInfo[uint64(curBID)], a)
			} else {
				top.abbrevs = append(top.abbrevs, a)
			}
			*ev = event{kind: evAbbrev, blockID: top.blockID, depth: len(stack), abbrev: a, start: start, end: r.pos}
			if err := fn(ev); err != nil {
				return 0, err
			}
		default:
			top := &stack[len(stack)-1]
			*ev = event{kind: evRecord, blockID: top.blockID, depth: len(stack), start: start, abbrevID: id, abbrevs: top.abbrevs}
			ops = ops[:0]
			if id == abbrevUnabbrev {
				code, err := r.readVBR(6)
				if err != nil {
					return 0, err
				}
				n, err := r.readVBR(6)
				if err != nil {
					return 0, err
				}
				if n > r.remaining()/6 {
					return 0, errorf("record with %d operands exceeds stream", n)
				}
				for i := uint64(0); i < n; i++ {
					v, err := r.readVBR(6)
					if err != nil {
						return 0, err
					}
					ops = append(ops, v)
				}
				ev.code = code
			} else {
				idx := id - firstUserAbbrev
				if idx >= uint64(len(top.abbrevs)) {
					return 0, errorf("undefined abbrev id %d in block %d", id, top.blockID)
				}
				ops, err = readAbbrevRecord(r, top.abbrevs[idx], ops, ev)
				if err != nil {
					return 0, err
				}
				ev.code = ops[0]
			}
			// ops stays the whole buffer, to be reused from its start:
			// resliced past the code, it lost a word of capacity per
			// record and was reallocated again and again.
			ev.ops = ops
			if id != abbrevUnabbrev {
				ev.ops = ops[1:]
			}
			ev.end = r.pos
			if top.blockID == blockInfoBlockID && ev.code == blockInfoSetBID {
				if len(ev.ops) < 1 || ev.ops[0] > 1<<32 {
					return 0, errorf("bad SETBID record")
				}
				curBID = int64(ev.ops[0])
			}
			if err := fn(ev); err != nil {
				return 0, err
			}
		}
	}
}

// readAbbrevDef reads an abbreviation definition, its operands taken from
// the free end of b's chunk (an index shard defines hundreds of them, each
// a separate allocation before).
func readAbbrevDef(r *bitReader, b *walkBuffers) (abbrev, error) {
	n, err := r.readVBR(5)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errorf("abbreviation with no operands")
	}
	if n > r.remaining() {
		return nil, errorf("abbreviation with %d operands exceeds stream", n)
	}
	if uint64(cap(b.defs)-len(b.defs)) < n {
		b.chunk(int(n))
	}
	defs := &b.defs
	at := len(*defs)
	a := abbrev((*defs)[at : at : at+int(n)])
	defer func() { *defs = (*defs)[:at+len(a)] }()
	for i := uint64(0); i < n; i++ {
		lit, err := r.read(1)
		if err != nil {
			return nil, err
		}
		if lit == 1 {
			v, err := r.readVBR(8)
			if err != nil {
				return nil, err
			}
			a = append(a, abbrevOp{enc: encLiteral, val: v})
			continue
		}
		enc, err := r.read(3)
		if err != nil {
			return nil, err
		}
		op := abbrevOp{enc: uint8(enc)}
		switch enc {
		case encFixed, encVBR:
			w, err := r.readVBR(5)
			if err != nil {
				return nil, err
			}
			if w == 0 {
				// A zero-width field is a literal zero (as in LLVM).
				op = abbrevOp{enc: encLiteral}
			} else if (enc == encFixed && w > 64) || (enc == encVBR && (w < 2 || w > 32)) {
				return nil, errorf("bad width %d for encoding %d", w, enc)
			} else {
				op.val = w
			}
		case encArray, encChar6, encBlob:
		default:
			return nil, errorf("unknown abbreviation encoding %d", enc)
		}
		a = append(a, op)
	}
	// Validate shape: array must be second to last with a scalar element,
	// blob must be last, and the record code must be a scalar.
	for i, op := range a {
		switch op.enc {
		case encArray:
			if i != len(a)-2 {
				return nil, errorf("array operand not second to last")
			}
			if e := a[i+1].enc; e == encArray || e == encBlob || e == encLiteral {
				return nil, errorf("invalid array element encoding %d", e)
			}
		case encBlob:
			if i != len(a)-1 {
				return nil, errorf("blob operand not last")
			}
		}
	}
	if a[0].enc == encArray || a[0].enc == encBlob {
		return nil, errorf("abbreviation starts with an array or blob")
	}
	return a, nil
}

const char6Table = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"

func readScalar(r *bitReader, op abbrevOp) (uint64, error) {
	switch op.enc {
	case encLiteral:
		return op.val, nil
	case encFixed:
		return r.read(uint(op.val))
	case encVBR:
		return r.readVBR(uint(op.val))
	case encChar6:
		v, err := r.read(6)
		if err != nil {
			return 0, err
		}
		return uint64(char6Table[v]), nil
	}
	return 0, errorf("encoding %d is not scalar", op.enc)
}

// readAbbrevRecord decodes one record using a; the result holds the code
// followed by the operands. A blob is stored in ev.
func readAbbrevRecord(r *bitReader, a abbrev, ops []uint64, ev *event) ([]uint64, error) {
	for i := 0; i < len(a); i++ {
		op := a[i]
		switch op.enc {
		case encArray:
			n, err := r.readVBR(6)
			if err != nil {
				return nil, err
			}
			elt := a[i+1]
			// Bound the allocation by what the stream can hold.
			minBits := uint64(6) // char6
			if elt.enc == encFixed || elt.enc == encVBR {
				minBits = elt.val
			}
			if n > r.remaining()/minBits {
				return nil, errorf("array of %d elements exceeds stream", n)
			}
			for j := uint64(0); j < n; j++ {
				v, err := readScalar(r, elt)
				if err != nil {
					return nil, err
				}
				ops = append(ops, v)
			}
			i++
		case encBlob:
			n, err := r.readVBR(6)
			if err != nil {
				return nil, err
			}
			if err := r.align32(); err != nil {
				return nil, err
			}
			if n > r.remaining()/8 {
				return nil, errorf("blob of %d bytes exceeds stream", n)
			}
			start := r.pos / 8
			ev.blob = r.data[start : start+n]
			ev.hasBlob = true
			r.pos += n * 8
			if err := r.align32(); err != nil {
				return nil, err
			}
		default:
			v, err := readScalar(r, op)
			if err != nil {
				return nil, err
			}
			ops = append(ops, v)
		}
	}
	return ops, nil
}
