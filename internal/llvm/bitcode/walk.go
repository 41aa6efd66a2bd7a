package bitcode

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

// walker is the state of one walk: the reader, the open blocks, and the
// event and operands handed to fn (overwritten by the next event).
type walker struct {
	c        container
	r        *bitReader
	b        *walkBuffers
	fn       func(*event) error
	stack    []scope
	ev       *event
	ops      []uint64
	curBID   int64 // SETBID target inside BLOCKINFO
	sawBlock bool
}

// walkWith is walk using (and keeping) the buffers b.
func walkWith(c container, b *walkBuffers, fn func(*event) error) (trailing int, err error) {
	b.reset()
	w := &walker{
		c:      c,
		r:      &bitReader{data: c.body, pos: 32, end: uint64(len(c.body)) * 8},
		b:      b,
		fn:     fn,
		stack:  b.stack,
		ev:     &event{},
		ops:    b.ops[:0],
		curBID: -1,
	}
	defer func() { b.stack, b.ops = w.stack[:0], w.ops[:0] }()
	for {
		if len(w.stack) == 0 {
			done, trailing, err := w.topLevelEnd()
			if done || err != nil {
				return trailing, err
			}
		}
		if err := w.step(); err != nil {
			return 0, err
		}
	}
}

// topLevelEnd reports whether the stream ends here, between top-level
// blocks, and how many all-zero bytes follow the last block.
func (w *walker) topLevelEnd() (done bool, trailing int, err error) {
	r := w.r
	if r.pos%32 != 0 {
		return true, 0, errorf("top level not aligned")
	}
	if r.remaining() == 0 && w.sawBlock {
		return true, 0, nil
	}
	// Tolerate zero padding after the last block (it can never
	// start a block: the top-level id would be END_BLOCK).
	rest := w.c.body[r.pos/8:]
	allZero := true
	for _, b := range rest {
		if b != 0 {
			allZero = false
			break
		}
	}
	if allZero && w.sawBlock {
		return true, len(rest), nil
	}
	return false, 0, nil
}

// step reads one abbreviation id and what it introduces, and reports it
// to fn.
func (w *walker) step() error {
	width := uint(2)
	if len(w.stack) > 0 {
		width = w.stack[len(w.stack)-1].width
	}
	start := w.r.pos
	id, err := w.r.read(width)
	if err != nil {
		return err
	}
	if len(w.stack) == 0 && id != abbrevEnterSubblock {
		return errorf("top-level abbrev id %d is not ENTER_SUBBLOCK", id)
	}
	switch id {
	case abbrevEndBlock:
		return w.endBlock(start)
	case abbrevEnterSubblock:
		return w.enterBlock(start)
	case abbrevDefine:
		return w.defineAbbrev(start)
	default:
		return w.record(start, id)
	}
}

// endBlock closes the innermost block, which must end where its header
// said, and reports an evExit.
func (w *walker) endBlock(start uint64) error {
	r := w.r
	top := w.stack[len(w.stack)-1]
	if err := r.align32(); err != nil {
		return err
	}
	if r.pos != top.end {
		return errorf("block %d ends at bit %d, header says %d", top.blockID, r.pos, top.end)
	}
	w.stack = w.stack[:len(w.stack)-1]
	*w.ev = event{kind: evExit, blockID: top.blockID, depth: len(w.stack) + 1, start: start, end: r.pos}
	return w.fn(w.ev)
}

// enterBlock reads a block header, opens the block with BLOCKINFO's
// abbreviations for it, and reports an evEnter; when fn answers
// errSkipBlock, the block is jumped over.
func (w *walker) enterBlock(start uint64) error {
	r := w.r
	bid, err := r.readVBR(8)
	if err != nil {
		return err
	}
	width, err := r.readVBR(4)
	if err != nil {
		return err
	}
	if width < 1 || width > 32 {
		return errorf("abbrev width %d for block %d", width, bid)
	}
	if err := r.align32(); err != nil {
		return err
	}
	words, err := r.read(32)
	if err != nil {
		return err
	}
	if words*32 > r.remaining() {
		return errorf("block %d claims %d words, %d bits left", bid, words, r.remaining())
	}
	stack := w.stack
	if len(stack) > 0 && stack[len(stack)-1].blockID == blockInfoBlockID {
		return errorf("subblock inside BLOCKINFO")
	}
	if len(stack) >= maxDepth {
		return errorf("blocks nested deeper than %d", maxDepth)
	}
	// The scope's abbreviation list reuses the one a block at
	// this depth had (this walk's or an earlier one's).
	var reuse []abbrev
	if len(stack) < cap(stack) {
		reuse = stack[:len(stack)+1][len(stack)].abbrevs[:0]
	}
	s := scope{blockID: bid, width: uint(width), end: r.pos + words*32}
	s.abbrevs = append(reuse, w.b.blockInfo[bid]...)
	w.stack = append(stack, s)
	w.sawBlock = true
	if bid == blockInfoBlockID {
		w.curBID = -1
	}
	*w.ev = event{kind: evEnter, blockID: bid, depth: len(w.stack), start: start, end: r.pos, width: uint(width)}
	if err := w.fn(w.ev); err == errSkipBlock {
		// The caller needs nothing inside: jump over it by its
		// length, with no evExit.
		r.pos = s.end
		w.stack = w.stack[:len(w.stack)-1]
	} else if err != nil {
		return err
	}
	return nil
}

// defineAbbrev reads an abbreviation definition into the innermost block
// (inside BLOCKINFO: into the block SETBID named) and reports an evAbbrev.
func (w *walker) defineAbbrev(start uint64) error {
	a, err := readAbbrevDef(w.r, w.b)
	if err != nil {
		return err
	}
	top := &w.stack[len(w.stack)-1]
	if top.blockID == blockInfoBlockID {
		if w.curBID < 0 {
			return errorf("DEFINE_ABBREV in BLOCKINFO before SETBID")
		}
		bi := w.b.blockInfo
		bi[uint64(w.curBID)] = append(bi[uint64(w.curBID)], a)
	} else {
		top.abbrevs = append(top.abbrevs, a)
	}
	*w.ev = event{kind: evAbbrev, blockID: top.blockID, depth: len(w.stack), abbrev: a, start: start, end: w.r.pos}
	return w.fn(w.ev)
}

// record reads a record, unabbreviated or with the abbreviation id names,
// notes a SETBID inside BLOCKINFO, and reports an evRecord.
func (w *walker) record(start, id uint64) error {
	top := &w.stack[len(w.stack)-1]
	ev := w.ev
	*ev = event{kind: evRecord, blockID: top.blockID, depth: len(w.stack), start: start, abbrevID: id, abbrevs: top.abbrevs}
	ops, err := w.readRecordOps(top, id)
	w.ops = ops
	if err != nil {
		return err
	}
	// ops stays the whole buffer, to be reused from its start:
	// resliced past the code, it lost a word of capacity per
	// record and was reallocated again and again.
	ev.ops = ops
	if id != abbrevUnabbrev {
		ev.ops = ops[1:]
	}
	ev.end = w.r.pos
	if top.blockID == blockInfoBlockID && ev.code == blockInfoSetBID {
		if len(ev.ops) < 1 || ev.ops[0] > 1<<32 {
			return errorf("bad SETBID record")
		}
		w.curBID = int64(ev.ops[0])
	}
	return w.fn(ev)
}

// readRecordOps reads a record's code (into w.ev.code) and operands into
// w.ops's memory. For an abbreviated record the code is the first of the
// returned operands.
func (w *walker) readRecordOps(top *scope, id uint64) ([]uint64, error) {
	r, ops := w.r, w.ops[:0]
	if id != abbrevUnabbrev {
		idx := id - firstUserAbbrev
		if idx >= uint64(len(top.abbrevs)) {
			return ops, errorf("undefined abbrev id %d in block %d", id, top.blockID)
		}
		ops, err := readAbbrevRecord(r, top.abbrevs[idx], ops, w.ev)
		if err != nil {
			return ops, err
		}
		w.ev.code = ops[0]
		return ops, nil
	}
	code, err := r.readVBR(6)
	if err != nil {
		return ops, err
	}
	n, err := r.readVBR(6)
	if err != nil {
		return ops, err
	}
	if n > r.remaining()/6 {
		return ops, errorf("record with %d operands exceeds stream", n)
	}
	for i := uint64(0); i < n; i++ {
		v, err := r.readVBR(6)
		if err != nil {
			return ops, err
		}
		ops = append(ops, v)
	}
	w.ev.code = code
	return ops, nil
}
