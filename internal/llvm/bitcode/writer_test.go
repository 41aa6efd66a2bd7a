package bitcode

import "encoding/binary"

// testWriter builds synthetic inputs: bitWriter plus the block structure
// and the magic.
type testWriter struct {
	bitWriter
	widths []uint
	starts []uint64 // bit offsets of block length words
}

func newBitWriter() *testWriter {
	w := &testWriter{}
	for _, b := range []byte{'B', 'C', 0xC0, 0xDE} {
		w.emit(uint64(b), 8)
	}
	return w
}

func (w *testWriter) width() uint {
	if len(w.widths) == 0 {
		return 2
	}
	return w.widths[len(w.widths)-1]
}

func (w *testWriter) enter(id uint64, width uint) {
	w.emit(abbrevEnterSubblock, w.width())
	w.vbr(id, 8)
	w.vbr(uint64(width), 4)
	w.align()
	w.starts = append(w.starts, w.nbits)
	w.emit(0, 32)
	w.widths = append(w.widths, width)
}

func (w *testWriter) exit() {
	w.emit(abbrevEndBlock, w.width())
	w.align()
	start := w.starts[len(w.starts)-1]
	w.starts = w.starts[:len(w.starts)-1]
	w.widths = w.widths[:len(w.widths)-1]
	binary.LittleEndian.PutUint32(w.buf[start/8:], uint32((w.nbits-start-32)/32))
}

// abbrevDef writes DEFINE_ABBREV; ops use the enc* constants, with val the
// literal value or width.
func (w *testWriter) abbrevDef(ops ...abbrevOp) {
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

func (w *testWriter) unabbrev(code uint64, ops ...uint64) {
	w.unabbrevRecord(w.width(), code, ops)
}

func (w *testWriter) bytes() []byte {
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
