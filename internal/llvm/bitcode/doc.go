// Package bitcode reads LLVM bitstream files far enough to compute a cache
// key for a ThinLTO index shard (the "*.thinlto.bc" file that lld writes for
// each distributed backend job), and rewrites a shard's module paths so that
// its backend can run in another tree.
//
// # Format
//
// A bitcode file is either raw ('B' 'C' 0xC0 0xDE followed by a bitstream) or
// wrapped in a 20-byte little-endian header (magic 0x0B17C0DE, version,
// offset, size, cputype) that locates the raw bitcode inside the file.
//
// The bitstream is a sequence of abbreviation ids, each AbbrevWidth bits wide
// (2 at top level). Ids 0-3 are builtin: END_BLOCK (align to 32 bits),
// ENTER_SUBBLOCK (vbr8 block id, vbr4 new abbrev width, align, 32-bit word
// count), DEFINE_ABBREV (vbr5 operand count, then per operand a literal bit
// and either a vbr8 literal value or a 3-bit encoding: fixed(vbr5 width),
// vbr(vbr5 width), array, char6, blob) and UNABBREV_RECORD (vbr6 code, vbr6
// operand count, vbr6 operands). Ids 4 and up select an abbreviation: those
// registered for the block id in the BLOCKINFO block (block id 0, SETBID
// record selects the target) followed by those defined in the current block.
// A record decodes to a code, a list of unsigned operands and optionally a
// blob; how it was encoded (which abbreviation, widths, block lengths) carries
// no meaning.
//
// A combined-index shard is a MODULE_BLOCK (8) holding a VERSION record, a
// MODULE_STRTAB_BLOCK (19) and a GLOBALVAL_SUMMARY_BLOCK (20), followed by a
// top-level STRTAB_BLOCK (23). The module string table lists every module the
// shard mentions as MST_CODE_ENTRY (1) [modid, namechar x N], each usually
// followed by MST_CODE_HASH (2) [5 x i32], the 160-bit hash of that module's
// bitcode. Summary records (e.g. FS_COMBINED_PROFILE, FS_COMBINED_GLOBALVAR_
// INIT_REFS) refer to modules only through that modid. lld names archive
// members "lib.a(member.o at OFFSET).TASK.PIDHEX.o", so the ENTRY paths change
// on every link; with clang/lld 22 they are the only bytes that differ between
// the shards of two otherwise identical links.
//
// # Normalisation and why it is safe
//
// NormalizedDigest decodes the whole stream and hashes, in stream order, a
// canonical, length-prefixed rendering of every event: block entry (id) and
// exit, every abbreviation definition, and every record (code, all operand
// values, blob bytes). Encoding details that LLVM attaches no meaning to
// (abbreviation ids chosen, block word counts, alignment padding) are left
// out, because they change with the length and character set of the paths.
// The one semantic substitution: the characters of an MST_CODE_ENTRY record
// are replaced by the module's content hash taken from the MST_CODE_HASH
// record that follows it. The path is kept instead when
//
//   - the hash is absent or zero (no content identity is known), or
//   - the same non-zero hash appears for more than one table entry (the
//     entries could then be told apart only by path; the backend finds its
//     own module's summaries by the input file's path, so dropping it could
//     conflate jobs for two identical members with different summaries).
//
// The second substitution concerns value ids. The thin link numbers the
// summaries of a shard (value ids, mapped to GUIDs by FS_VALUE_GUID records)
// in the order it walks hash tables whose layout depends on the module
// paths, so with PID-bearing member paths two links of the same objects can
// number the same summaries differently and write them in another order
// (seen with lua5.4's liblua.a: 20 of 33 shards differed only so). The
// summary block is therefore rendered by canonicalSummary: every value id
// replaced by its GUID, the GUID records by the sorted set of GUIDs, the
// function and variable summaries (then the aliases) sorted by GUID while
// the summaries of one GUID keep their stream order. The type metadata
// records (FS_TYPE_TESTS and the four vcall kinds, written for whole-program
// devirtualisation and CFI) hold type id GUIDs and offsets, no value ids;
// the writer puts them just before the function summary they describe, so
// they move with it. LLVM's reader keys
// summaries by GUID and appends those of one GUID in stream order, so equal
// renderings read into the same index. This is done only for a block
// exactly as LLVM 22 writes it for a distributed backend (summary version
// 12; only record codes whose layout is known, so that no value id stays
// behind under another numbering; the writer's phase order; every value id
// resolvable and every count consistent). Any other block (parameter
// access, memprof records, another summary version) is rendered
// as decoded, value ids and all: a miss across such links, never a
// conflation.
//
// The modid operand of each ENTRY and every summary record's module
// reference are hashed unchanged, so two shards with equal digests have the
// same record stream, the same modid -> content mapping and the same set of
// references; they can differ only in the file names through which equal
// content is reached (and in the value-id numbering, see above). A relink
// can also reorder the module table (it is sorted by path, and lld copies
// archive members out next to the output, so linking into another directory
// moves them) and so renumber the modids. When the summary block is
// canonicalised, the table is rendered as the sorted set of module
// identities without modids, and each summary's modid is replaced by its
// module's identity (modid -> identity is a bijection, checked), so the
// digest does not change. When it is not, modids are hashed as they are and
// a reordered table is a cache miss, never a wrong hit. The digest
// does not cover the files the backend reads; callers must key those (the
// job's input module and the imported modules) by content separately, which
// the recorded hashes make possible.
//
// # Rewriting module paths
//
// The backend loads each imported module from the path the shard's module
// table records (relative to its working directory) and finds its own
// summaries under the path of its input, so a backend run elsewhere needs
// the modules at the recorded paths. RewriteModulePaths names them anew
// instead. Only the MODULE_STRTAB blocks change: they are written again
// element by element (abbreviation definitions and untouched records keep
// their bits; a renamed ENTRY takes the narrowest of the block's
// abbreviations, as LLVM's writeModStrings does), and the bytes around them
// are kept but for the length words of the enclosing blocks, which grow or
// shrink by the same number of words (block bodies are 32-bit aligned, so a
// block can be replaced without touching anything else). Nothing in a
// combined index points at a bit position (only regular modules, with a
// MODULE_CODE_VSTOFFSET record, do; such files are refused). The modids and
// MST_CODE_HASH records stay, so NormalizedDigest does not change when every
// module has a hash of its own, and the result is decoded again and
// compared with the input before it is returned.
package bitcode
