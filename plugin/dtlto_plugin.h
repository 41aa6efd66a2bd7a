/*
 * dtlto_plugin.h - the C interface between a linker and a DTLTO distribution
 * plugin (the "plugin" design of Distributed ThinLTO).
 *
 * Written for thindist from the description of the interface in the public
 * LLVM fork that implemented the plugin design (its llvm/DTLTO/Plugin.h). A
 * linker given --thinlto-distribute=<kind> loads
 * <directory of the linker>/../lib/libDTLTO<kind>.so (DTLTO<kind>.dll on
 * Windows), looks up dtltoPerformCodegen and calls it once with every
 * backend compilation of the link.
 *
 * All types are plain C structs; the library libDTLTOthindist.so exports
 * dtltoPerformCodegen with exactly this signature.
 */
#ifndef THINDIST_DTLTO_PLUGIN_H
#define THINDIST_DTLTO_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque; owned by the linker and passed back to its callbacks. */
typedef struct dtltoDiagContextTy dtltoDiagContextTy;

/* Reports one diagnostic (a NUL-terminated message) through the linker. */
typedef void (*dtltoEmitDiagTy)(const dtltoDiagContextTy *ctx,
                                const char *message);

typedef struct dtltoConfigTy {
  const char *DbsName;                  /* the distribution system's name */
  const dtltoDiagContextTy *DiagContext;
  dtltoEmitDiagTy EmitError;
  dtltoEmitDiagTy EmitWarn;
} dtltoConfigTy;

/* One backend compilation. */
typedef struct dtltoBitcodeNodeTy {
  const char *ModuleId;         /* as the link names it: "m.o", "lib.a(m.o at 88)" */
  const char *ModulePath;       /* the bitcode file on disk (absolute) */
  size_t ModuleSize;            /* its size in bytes */
  const char *SummaryIndexPath; /* the module's index shard */
  const char *NativeObjectPath; /* where the object must be written */
  size_t ImportsListSize;
  const char **ImportsList;     /* modules the backend imports from */
  const char *TargetTriple;
  size_t TaskNumber;            /* the LTO task number */
} dtltoBitcodeNodeTy;

/*
 * Compiles every node: NodesNum entries of BitcodeNodes, largest module
 * first. Argv holds Argc common clang options (e.g. -O2 -ffunction-sections).
 * Returns 0 when every NativeObjectPath holds a valid object file, non-zero
 * otherwise, with the details reported through Cfg->EmitError/EmitWarn.
 */
typedef int (*dtltoPerformCodegenTy)(const dtltoConfigTy *Cfg, size_t NodesNum,
                                     const dtltoBitcodeNodeTy *const *BitcodeNodes,
                                     size_t Argc, const char **Argv);

/*
 * cgo generates its own prototype of an exported Go function (without the
 * const qualifiers, which do not change the ABI); the Go side defines
 * DTLTO_PLUGIN_NO_PROTOTYPE so the two declarations never meet.
 */
#ifndef DTLTO_PLUGIN_NO_PROTOTYPE
int dtltoPerformCodegen(const dtltoConfigTy *Cfg, size_t NodesNum,
                        const dtltoBitcodeNodeTy *const *BitcodeNodes,
                        size_t Argc, const char **Argv);
#endif

#ifdef __cplusplus
}
#endif

#endif /* THINDIST_DTLTO_PLUGIN_H */
