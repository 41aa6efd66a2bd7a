package bitcode

import "encoding/binary"

// bitWriter is a minimal bitstream writer used to build synthetic inputs.
type bitWriter struct {
	buf    []byte
	nbits  uint64
	widths []uint
	starts []uint64 // bit offsets of block length words
}

func newBitWriter() *bitWriter {
	w := &bitWriter{}
	for _, b := range []byte{'B', 'C', 0xC0, 0xDE} {
		w.emit(uint64(b), 8)
	}
	return w
}

func (w *bitWriter) width() uint {
	if len(w.widths) == 0 {
		return 2
	}
	return w.widths[len(w.widths)-1]
}

func (w *bitWriter) emit(v uint64, n uint) {
	for i := uint(0); i < n; i++ {
		if w.nbits%8 == 0 {
			w.buf = append(w.buf, 0)
		}
		if v>>i&1 == 1 {
			w.buf[w.nbits/8] |= 1 << (w.nbits % 8)
		}
		w.nbits++
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
	for w.nbits%32 != 0 {
		w.emit(0, 1)
	}
}

func (w *bitWriter) enter(id uint64, width uint) {
	w.emit(abbrevEnterSubblock, w.width())
	w.vbr(id, 8)
	w.vbr(uint64(width), 4)
	w.align()
	w.starts = append(w.starts, w.nbits)
	w.emit(0, 32)
	w.widths = append(w.widths, width)
}

func (w *bitWriter) exit() {
	w.emit(abbrevEndBlock, w.width())
	w.align()
	start := w.starts[len(w.starts)-1]
	w.starts = w.starts[:len(w.starts)-1]
	w.widths = w.widths[:len(w.widths)-1]
	binary.LittleEndian.PutUint32(w.buf[start/8:], uint32((w.nbits-start-32)/32))
}

// abbrevDef writes DEFINE_ABBREV; ops use the enc* constants, with val the
// literal value or width.
func (w *bitWriter) abbrevDef(ops ...abbrevOp) {
	w.emit(abbrevDefine, w.width())
	w.vbr(uint64(len(ops)), 5)
	for _, op := range ops {
		if op.enc == encLiteral {
			w.emit(1, 1)
			w.vbr(op.val, 8)
			continue
		}
		w.emit(0, 1)
		w.emit(uint64(op.enc), 3)
		if op.enc == encFixed || op.enc == encVBR {
			w.vbr(op.val, 5)
		}
	}
}

func (w *bitWriter) unabbrev(code uint64, ops ...uint64) {
	w.emit(abbrevUnabbrev, w.width())
	w.vbr(code, 6)
	w.vbr(uint64(len(ops)), 6)
	for _, v := range ops {
		w.vbr(v, 6)
	}
}

func (w *bitWriter) bytes() []byte {
	return append([]byte(nil), w.buf...)
}

func char6(c byte) uint64 {
	for i := 0; i < len(char6Table); i++ {
		if char6Table[i] == c {
			return uint64(i)
		}
	}
	panic("not char6")
}
