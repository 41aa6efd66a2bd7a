package bitcode

import (
	"cmp"
	"slices"
)

// Record codes of a combined index's GLOBALVAL_SUMMARY_BLOCK (LLVM's
// GlobalValueSummarySymtabCodes) that canonicalSummary understands.
const (
	globalValSummaryBlockID = 20

	fsCombinedProfile        = 5  // [valueid, modid, flags, instcount, fflags, entrycount, numrefs, rorefcnt, worefcnt, numrefs x valueid, n x (valueid, hotness)]
	fsCombinedGlobalVarRefs  = 6  // [valueid, modid, flags, varflags, n x valueid]
	fsCombinedAlias          = 8  // [valueid, modid, flags, aliasee valueid or 0]
	fsVersion                = 10 // [summary version]
	fsTypeTests              = 11 // [n x typeid GUID]: type metadata of the function summary that follows
	fsTypeTestAssumeVCalls   = 12 // [n x (typeid GUID, offset)]
	fsTypeCheckedLoadVCalls  = 13 // [n x (typeid GUID, offset)]
	fsTypeTestAssumeConstVC  = 14 // [typeid GUID, offset, n x arg]
	fsTypeCheckedLoadConstVC = 15 // [typeid GUID, offset, n x arg]
	fsValueGUID              = 16 // [valueid, guid >> 32, guid & 0xffffffff]
	fsCFIFunctionDefs        = 17 // [n x (strtab offset, size)]
	fsCFIFunctionDecls       = 18 // [n x (strtab offset, size)]
	fsFlags                  = 20 // [flags]
	fsTypeID                 = 21 // type id summary: strtab names, no value ids
	fsBlockCount             = 24 // [count]
	canonicalSummaryVersion  = 12 // FS_VERSION written by LLVM 22
	combinedProfileFixedOps  = 9
	combinedGlobalVarFixedOp = 4
)

// The phases of a combined summary block, in the order LLVM's
// IndexBitcodeWriter::writeCombinedGlobalValueSummary writes them. A block
// whose records are out of this order is not canonicalised.
func summaryPhase(code uint64) (int, bool) {
	switch code {
	case fsVersion:
		return 0, true
	case fsFlags:
		return 1, true
	case fsValueGUID:
		return 2, true
	case fsCombinedProfile, fsCombinedGlobalVarRefs, fsTypeTests, fsTypeTestAssumeVCalls,
		fsTypeCheckedLoadVCalls, fsTypeTestAssumeConstVC, fsTypeCheckedLoadConstVC:
		return 3, true
	case fsCombinedAlias:
		return 4, true
	case fsCFIFunctionDefs:
		return 5, true
	case fsCFIFunctionDecls:
		return 6, true
	case fsTypeID:
		return 7, true
	case fsBlockCount:
		return 8, true
	}
	return 0, false
}

// heldEvent is a copy of an event, kept past walk's callback. Its blob is
// the walked data's and its abbreviation the walk's (neither is reused
// while walk runs, nor after): valid as long as the data is unchanged.
type heldEvent struct {
	kind    eventKind
	blockID uint64
	depth   int
	abbrev  abbrev
	code    uint64
	ops     []uint64
	blob    []byte
	hasBlob bool
}

func hold(ev *event) heldEvent {
	var a holdArena
	return a.hold(ev)
}

// holdArena copies the operands of held events into shared chunks rather
// than one allocation per event.
type holdArena struct{ ops []uint64 }

// reset makes the arena's last (largest) chunk free for reuse: call it
// only once no held event refers to it any more.
func (a *holdArena) reset() { a.ops = a.ops[:0] }

func (a *holdArena) hold(ev *event) heldEvent {
	h := heldEvent{
		kind: ev.kind, blockID: ev.blockID, depth: ev.depth, code: ev.code, hasBlob: ev.hasBlob,
		abbrev: ev.abbrev, blob: ev.blob,
	}
	if n := len(ev.ops); n > 0 {
		if cap(a.ops)-len(a.ops) < n {
			a.ops = make([]uint64, 0, max(2*cap(a.ops), 128, n))
		}
		start := len(a.ops)
		a.ops = append(a.ops, ev.ops...)
		h.ops = a.ops[start : start+n : start+n]
	}
	return h
}

func (h *heldEvent) event() event {
	return event{kind: h.kind, blockID: h.blockID, depth: h.depth, abbrev: h.abbrev,
		code: h.code, ops: h.ops, blob: h.blob, hasBlob: h.hasBlob}
}

// isTypeMetadataCode reports whether code is one of the type metadata
// records (11-15).
func isTypeMetadataCode(code uint64) bool {
	return code >= fsTypeTests && code <= fsTypeCheckedLoadConstVC
}

// typeMetadataOK reports whether ops fit the layout of a type metadata
// record (codes 11-15). They hold type id GUIDs, offsets and constant
// arguments, never value ids, so they are rendered as they are.
func typeMetadataOK(code uint64, ops []uint64) bool {
	switch code {
	case fsTypeTests:
		return len(ops) > 0
	case fsTypeTestAssumeVCalls, fsTypeCheckedLoadVCalls:
		return len(ops) > 0 && len(ops)%2 == 0
	case fsTypeTestAssumeConstVC, fsTypeCheckedLoadConstVC:
		return len(ops) >= 2
	}
	return false
}

// summaryUnit is one summary record with its value ids replaced by GUIDs.
type summaryUnit struct {
	guid uint64 // of the record's own value id
	seq  int    // position in the stream
	ops  []summaryOp
	code uint64
	// meta are the type metadata records (whole-program devirtualisation,
	// CFI) the writer puts just before a function summary; they belong to
	// it and move with it.
	meta []heldEvent
}

// summaryOp is one operand of a summary record, 16 bytes: a main
// module's summary block holds one per operand of hundreds of thousands of
// records (gen5000's: 420,000).
type summaryOp struct {
	kind opKind
	v    uint64
}

type opKind uint8

const (
	opValue  opKind = iota // v as written
	opGUID                 // v is a GUID + 1 standing for a value id (0: "no value")
	opModule               // v is a modid, rendered as its module's identity
)

// canonicalSummary renders the events of a combined index's summary block
// (those between its ENTER and EXIT) so that the value ids the thin link
// numbered the summaries with drop out. lld numbers them in an order that
// depends on hash tables keyed by module paths, and those paths carry its
// PID, so two links of the same objects can number the same summaries
// differently.
//
// Every value id is replaced by its GUID (FS_VALUE_GUID gives a bijection
// within the shard), the FS_VALUE_GUID records by the sorted set of GUIDs,
// and the function and variable summaries (and, separately, the aliases)
// are sorted by GUID, keeping the stream order of summaries that share a
// GUID. The reader keys summaries by GUID and appends the summaries of one
// GUID in stream order, so two shards with the same rendering read into the
// same index. This is only done when the block is exactly what LLVM 22's
// writer produces for a distributed backend: summary version 12, only
// record codes whose layout is known here (so that no value id can stay
// behind under another numbering), in the writer's phase order, every value
// id resolvable, every count consistent. Anything else returns ok=false and
// the caller renders the block as it is.
//
// The modid operand of each summary is replaced by the identity of its
// module (modules: modid -> identity, as NormalizedDigest renders it), so
// the rendering does not depend on the module table's order either; a modid
// missing from the table refuses the block.
func canonicalSummary(evs []heldEvent, modules map[uint64][]byte) (out []byte, ok bool) {
	return new(summaryScratch).canonical(evs, modules)
}

// summaryScratch is what canonicalSummary builds while it runs, kept for
// the next shard: one slice of units and one of operands instead of a
// slice per summary (which was most of a shard's garbage).
type summaryScratch struct {
	ids     map[uint64]uint64 // value id -> GUID
	sorted  []uint64          // the GUIDs
	units   []summaryUnit
	aliases []summaryUnit
	ops     []summaryOp // the units' operands, end to end
	rest    []heldEvent
	order   []int
	out     []byte
}

// reset drops what the last call left, keeping the memory. The events and
// module identities it referred to belong to the caller.
func (sc *summaryScratch) reset() {
	if len(sc.ids) > 4096 {
		// Clearing costs what the map once held: a big shard's map
		// would slow every small one after it.
		sc.ids = nil
	}
	clear(sc.ids)
	clear(sc.units)
	clear(sc.aliases)
	clear(sc.ops)
	clear(sc.rest)
	sc.sorted, sc.units, sc.aliases, sc.ops, sc.rest, sc.order, sc.out =
		sc.sorted[:0], sc.units[:0], sc.aliases[:0], sc.ops[:0], sc.rest[:0], sc.order[:0], sc.out[:0]
}

// canonical is canonicalSummary with sc's memory; out is valid until the
// next call.
func (sc *summaryScratch) canonical(evs []heldEvent, modules map[uint64][]byte) (out []byte, ok bool) {
	sc.reset()
	if sc.ids == nil {
		sc.ids = map[uint64]uint64{}
	}
	if !sc.readGUIDs(evs) || !sc.collectUnits(evs, modules) {
		return nil, false
	}
	return sc.render(modules), true
}

// readGUIDs is the first pass over a summary block: it checks the version
// and the phase order of the records, and fills sc.ids (value id -> GUID)
// and sc.sorted (the GUIDs, sorted). It reports false for a block outside
// the canonical form: nested blocks, an unknown record code, a blob, a
// record out of phase order, a version other than the one known here or
// none, a malformed or repeated FS_VALUE_GUID, or two value ids for one
// GUID.
func (sc *summaryScratch) readGUIDs(evs []heldEvent) bool {
	ids := sc.ids
	phase := -1
	sawVersion := false
	for _, ev := range evs {
		if ev.kind == evEnter || (ev.kind == evExit) {
			return false // nested blocks: not a combined summary we know
		}
		if ev.kind != evRecord {
			continue
		}
		p, known := summaryPhase(ev.code)
		if !known || ev.hasBlob || p < phase {
			return false
		}
		phase = p
		switch ev.code {
		case fsVersion:
			if sawVersion || len(ev.ops) != 1 || ev.ops[0] != canonicalSummaryVersion {
				return false
			}
			sawVersion = true
		case fsValueGUID:
			if len(ev.ops) != 3 || ev.ops[0] == 0 || ev.ops[1] > 0xFFFFFFFF || ev.ops[2] > 0xFFFFFFFF {
				return false
			}
			g := ev.ops[1]<<32 | ev.ops[2]
			if _, dup := ids[ev.ops[0]]; dup {
				return false
			}
			ids[ev.ops[0]] = g
			sc.sorted = append(sc.sorted, g)
		}
	}
	if !sawVersion {
		return false
	}
	slices.Sort(sc.sorted)
	for i := 1; i < len(sc.sorted); i++ {
		if sc.sorted[i] == sc.sorted[i-1] {
			return false // two value ids for one GUID
		}
	}
	return true
}

// collectUnits is the second pass over a summary block, after readGUIDs:
// it turns every function, variable and alias summary into a summaryUnit
// whose value ids are GUIDs and whose modid is a module (sc.units and
// sc.aliases, in stream order), attaches each run of type metadata to the
// function summary after it, and keeps every other event in sc.rest, in
// order. It reports false when a summary does not have its record kind's
// layout, a value id or modid does not resolve, or type metadata is not
// followed by a function summary.
func (sc *summaryScratch) collectUnits(evs []heldEvent, modules map[uint64][]byte) bool {
	// Sized once: grown by appending, the operands of a main module's
	// summaries (tens of MB on a first shard, whose memory is all fresh)
	// were copied and allocated twice over.
	records, operands := 0, 0
	for i := range evs {
		records++
		operands += len(evs[i].ops)
	}
	sc.ops = slices.Grow(sc.ops, operands)
	sc.units = slices.Grow(sc.units, records)
	units, aliases := sc.units, sc.aliases
	rest := sc.rest      // abbreviations and records without value ids, in order
	var meta []heldEvent // type metadata waiting for its function summary
	defer func() { sc.units, sc.aliases, sc.rest = units, aliases, rest }()
	for seq, ev := range evs {
		if ev.kind != evRecord {
			rest = append(rest, ev)
			continue
		}
		if len(meta) > 0 && ev.code != fsCombinedProfile && !isTypeMetadataCode(ev.code) {
			return false // type metadata not followed by a function summary
		}
		if isTypeMetadataCode(ev.code) {
			if !typeMetadataOK(ev.code, ev.ops) {
				return false
			}
			meta = append(meta, ev)
			continue
		}
		isID, summary, ok := summaryIDOperands(ev.code, ev.ops)
		if !ok {
			return false
		}
		if !summary {
			if ev.code != fsValueGUID {
				rest = append(rest, ev)
			}
			continue
		}
		u := summaryUnit{seq: seq, code: ev.code}
		if ev.code == fsCombinedProfile {
			u.meta, meta = meta, nil
		}
		if !sc.appendOperands(&u, ev.ops, isID, modules) {
			return false
		}
		if ev.code == fsCombinedAlias {
			aliases = append(aliases, u)
		} else {
			units = append(units, u)
		}
	}
	return len(meta) == 0 // else type metadata at the end of the block
}

// summaryIDOperands returns, for a function, variable or alias summary
// record (summary=true), which of its operands are value ids. For any other
// record code it returns summary=false. ok is false when a summary's
// operands do not have its record kind's layout.
func summaryIDOperands(code uint64, ops []uint64) (isID func(i int) bool, summary, ok bool) {
	switch code {
	case fsCombinedProfile:
		if len(ops) < combinedProfileFixedOps {
			return nil, true, false
		}
		numRefs, ro, wo := ops[6], ops[7], ops[8]
		if numRefs > uint64(len(ops)-combinedProfileFixedOps) || ro > numRefs || wo > numRefs-ro {
			return nil, true, false
		}
		callsAt := combinedProfileFixedOps + int(numRefs)
		if (len(ops)-callsAt)%2 != 0 {
			return nil, true, false
		}
		return func(i int) bool {
			return i == 0 || (i >= combinedProfileFixedOps && i < callsAt) || (i >= callsAt && (i-callsAt)%2 == 0)
		}, true, true
	case fsCombinedGlobalVarRefs:
		if len(ops) < combinedGlobalVarFixedOp {
			return nil, true, false
		}
		return func(i int) bool { return i == 0 || i >= combinedGlobalVarFixedOp }, true, true
	case fsCombinedAlias:
		if len(ops) != 4 {
			return nil, true, false
		}
		return func(i int) bool { return i == 0 || i == 3 }, true, true
	}
	return nil, false, true
}

// appendOperands appends u's operands to sc.ops, rendered: the modid
// (operand 1 in every summary layout) as its module, the value ids (isID)
// as GUIDs, and sets u.ops and u.guid (the GUID of operand 0). It reports
// false when the modid is not in modules or a value id is not in sc.ids
// (an alias's aliasee 0, "not in the index", is kept as such).
func (sc *summaryScratch) appendOperands(u *summaryUnit, ops []uint64, isID func(i int) bool, modules map[uint64][]byte) bool {
	start := len(sc.ops)
	for i, v := range ops {
		if i == 1 { // modid, in every layout above
			if _, ok := modules[v]; !ok {
				return false
			}
			sc.ops = append(sc.ops, summaryOp{kind: opModule, v: v})
			continue
		}
		if !isID(i) {
			sc.ops = append(sc.ops, summaryOp{kind: opValue, v: v})
			continue
		}
		if v == 0 && u.code == fsCombinedAlias && i == 3 {
			sc.ops = append(sc.ops, summaryOp{kind: opGUID}) // aliasee not in the index
			continue
		}
		g, ok := sc.ids[v]
		if !ok {
			return false
		}
		sc.ops = append(sc.ops, summaryOp{kind: opGUID, v: g + 1}) // +1: never the "no value" 0
		if i == 0 {
			u.guid = g
		}
	}
	// A later append may move sc.ops; what this unit's slice
	// points at stays as written.
	u.ops = sc.ops[start:len(sc.ops):len(sc.ops)]
	return true
}

// render writes the canonical rendering of what readGUIDs and collectUnits
// gathered: the other events in order, the sorted GUIDs, then the summaries
// and the aliases, each stably sorted by GUID. The digester frames every
// field, so the rendering is unambiguous. The result is sc.out's memory.
func (sc *summaryScratch) render(modules map[uint64][]byte) []byte {
	d := &digester{out: sc.out}
	defer func() { sc.out = d.out }()
	d.uint(uint64(len(sc.rest)))
	for i := range sc.rest {
		ev := sc.rest[i].event()
		d.event(&ev)
	}
	d.uint(uint64(len(sc.sorted)))
	for _, g := range sc.sorted {
		d.uint(g)
	}
	for _, list := range [][]summaryUnit{sc.units, sc.aliases} {
		// A stable sort by GUID, of indexes (moving the units themselves
		// was most of the function's time).
		order := sc.order[:0]
		for i := range list {
			order = append(order, i)
		}
		sc.order = order
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(list[a].guid, list[b].guid); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		d.uint(uint64(len(list)))
		for _, i := range order {
			renderUnit(d, &list[i], modules)
		}
	}
	return d.out
}

// renderUnit writes one summary: its code, its operands tagged by kind
// (a module as its identity), and the type metadata it carries.
func renderUnit(d *digester, u *summaryUnit, modules map[uint64][]byte) {
	d.uint(u.code)
	d.uint(uint64(len(u.ops)))
	for _, op := range u.ops {
		switch op.kind {
		case opModule:
			d.tag('m')
			d.bytes(modules[op.v])
			continue
		case opGUID:
			d.tag('g')
		default:
			d.tag('v')
		}
		d.uint(op.v)
	}
	d.uint(uint64(len(u.meta)))
	for i := range u.meta {
		ev := u.meta[i].event()
		d.event(&ev)
	}
}
