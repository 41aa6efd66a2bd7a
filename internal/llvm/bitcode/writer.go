package bitcode

import "strings"

// bitWriter appends little-endian bit fields, LLVM style (low bits first),
// the inverse of bitReader. It starts at bit 0 of its own buffer, so what it
// writes can be spliced into a stream at any 32-bit aligned position (a
// block body) with the same alignment.
type bitWriter struct {
	buf   []byte
	nbits uint64
}

func (w *bitWriter) emit(v uint64, n uint) {
	for n > 0 {
		bit := uint(w.nbits & 7)
		if bit == 0 {
			w.buf = append(w.buf, 0)
		}
		take := 8 - bit
		if take > n {
			take = n
		}
		w.buf[len(w.buf)-1] |= byte(v&(1<<take-1)) << bit
		v >>= take
		n -= take
		w.nbits += uint64(take)
	}
}

func (w *bitWriter) vbr(v uint64, n uint) {
	hi := uint64(1) << (n - 1)
	for v >= hi {
		w.emit(v&(hi-1)|hi, n)
		v >>= n - 1
	}
	w.emit(v, n)
}

func (w *bitWriter) align() {
	if r := w.nbits % 32; r != 0 {
		w.emit(0, uint(32-r))
	}
}

// copyBits appends bits [from, to) of src unchanged.
func (w *bitWriter) copyBits(src []byte, from, to uint64) error {
	r := &bitReader{data: src, pos: from, end: to}
	for r.pos < to {
		n := uint(min(32, to-r.pos))
		v, err := r.read(n)
		if err != nil {
			return err
		}
		w.emit(v, n)
	}
	return nil
}

// unabbrevRecord appends an UNABBREV_RECORD in a block whose abbreviation
// ids are width bits wide.
func (w *bitWriter) unabbrevRecord(width uint, code uint64, ops []uint64) {
	w.emit(abbrevUnabbrev, width)
	w.vbr(code, 6)
	w.vbr(uint64(len(ops)), 6)
	for _, v := range ops {
		w.vbr(v, 6)
	}
}

// abbrevRecord appends a record encoded with abbreviation a, selected by
// id. The record must fit a (see fits).
func (w *bitWriter) abbrevRecord(width uint, id uint64, a abbrev, code uint64, ops []uint64, blob []byte) {
	w.emit(id, width)
	vals := append([]uint64{code}, ops...)
	i := 0
	for k, op := range a {
		switch op.enc {
		case encArray:
			elt := a[k+1]
			w.vbr(uint64(len(vals)-i), 6)
			for ; i < len(vals); i++ {
				w.scalar(elt, vals[i])
			}
			return
		case encBlob:
			w.vbr(uint64(len(blob)), 6)
			w.align()
			for _, b := range blob {
				w.emit(uint64(b), 8)
			}
			w.align()
			return
		default:
			w.scalar(op, vals[i])
			i++
		}
	}
}

func (w *bitWriter) scalar(op abbrevOp, v uint64) {
	switch op.enc {
	case encFixed:
		w.emit(v, uint(op.val))
	case encVBR:
		w.vbr(v, uint(op.val))
	case encChar6:
		w.emit(uint64(strings.IndexByte(char6Table, byte(v))), 6)
	}
}

// fits reports whether a record (code, ops, and a blob if hasBlob) can be
// encoded with abbreviation a and decodes back to the same values.
func fits(a abbrev, code uint64, ops []uint64, hasBlob bool) bool {
	vals := append([]uint64{code}, ops...)
	i := 0
	for k, op := range a {
		switch op.enc {
		case encArray:
			for ; i < len(vals); i++ {
				if !scalarFits(a[k+1], vals[i]) {
					return false
				}
			}
			return !hasBlob
		case encBlob:
			return hasBlob && i == len(vals)
		default:
			if i == len(vals) || !scalarFits(op, vals[i]) {
				return false
			}
			i++
		}
	}
	return i == len(vals) && !hasBlob
}

func scalarFits(op abbrevOp, v uint64) bool {
	switch op.enc {
	case encLiteral:
		return v == op.val
	case encFixed:
		return op.val >= 64 || v < 1<<op.val
	case encVBR:
		return true
	case encChar6:
		return v < 256 && strings.IndexByte(char6Table, byte(v)) >= 0
	}
	return false
}

// writeRecord appends a record with the smallest encoding among the
// abbreviations in scope (abbrevs, selected by firstUserAbbrev+index) and
// the unabbreviated form, as LLVM's writer picks the narrowest of the
// abbreviations it defines for a string. Ties go to the lowest id.
func (w *bitWriter) writeRecord(width uint, abbrevs []abbrev, code uint64, ops []uint64, blob []byte, hasBlob bool) error {
	best, bestBits, have := -1, uint64(0), false
	if !hasBlob { // an unabbreviated record cannot hold a blob
		var t bitWriter
		t.unabbrevRecord(width, code, ops)
		bestBits, have = t.nbits, true
	}
	for i, a := range abbrevs {
		if !fits(a, code, ops, hasBlob) {
			continue
		}
		var t bitWriter
		t.abbrevRecord(width, uint64(firstUserAbbrev+i), a, code, ops, blob)
		if !have || t.nbits < bestBits {
			best, bestBits, have = i, t.nbits, true
		}
	}
	switch {
	case best >= 0:
		w.abbrevRecord(width, uint64(firstUserAbbrev+best), abbrevs[best], code, ops, blob)
	case hasBlob:
		return errorf("no abbreviation in scope can hold record %d with its blob", code)
	default:
		w.unabbrevRecord(width, code, ops)
	}
	return nil
}
