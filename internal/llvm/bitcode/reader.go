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
