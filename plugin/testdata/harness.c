/*
 * harness.c - does what a linker built with the DTLTO plugin design does,
 * so libDTLTOthindist.so can be tested without that linker:
 *
 *   1. runs the thin link: <lld> --thinlto-index-only
 *      --thinlto-emit-imports-files -o <dir>/thin.out <objects...>
 *      (an index shard <obj>.thinlto.bc and an imports list <obj>.imports
 *      beside every bitcode object);
 *   2. builds the node array from them, largest module first, the native
 *      object of <obj> being <dir>/<basename obj>.<task>.native.o;
 *   3. dlopens the plugin, calls dtltoPerformCodegen, prints every
 *      diagnostic, and checks, as the linker does, that every native object
 *      exists.
 *
 * Usage: harness [options] PLUGIN OBJECT...
 *   --lld PATH      the linker for the thin link (default ld.lld-22)
 *   --link-arg ARG  add ARG to the thin link (repeatable), e.g. --undefined=main
 *                   (a thin link without the C runtime keeps only what is
 *                   referenced)
 *   --dir DIR       where native objects go (default .)
 *   --opt ARG       append ARG to Argv (repeatable)
 *   --member ID=PATH  an archive member of the link: a node whose ModuleId
 *                   is ID ("lib.a(m.o at 98)", the name in the shards) and
 *                   whose content is the extracted file PATH (repeatable)
 *   --mode MODE     normal, or a malformed call: null-cfg, null-nodes,
 *                   null-node, null-argv, null-argv-elem, null-module-id,
 *                   null-imports, garbage-nodes (an unmapped non-NULL
 *                   array), no-callbacks
 *   --no-thin-link  reuse the shards of an earlier run
 *   --output FILE   ignored: a linker's output option on the harness's
 *                   command line, which the plugin reads as it reads the
 *                   linker's
 *
 * Output: "error: MSG" / "warning: MSG" for each diagnostic, one line
 * "object: PATH" per node in call order, then "return: N". Exit status:
 * 0 when the plugin returned 0 and every object exists, 1 when the plugin
 * returned non-zero, 2 when the harness itself failed, 3 when the plugin
 * returned 0 but an object is missing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtlto_plugin.h"

/* The linker owns the diagnostic context; here it counts. */
struct dtltoDiagContextTy {
  int errors;
  int warnings;
};

static void emitError(const dtltoDiagContextTy *ctx, const char *msg) {
  ((struct dtltoDiagContextTy *)ctx)->errors++;
  printf("error: %s\n", msg);
  fflush(stdout);
}

static void emitWarn(const dtltoDiagContextTy *ctx, const char *msg) {
  ((struct dtltoDiagContextTy *)ctx)->warnings++;
  printf("warning: %s\n", msg);
  fflush(stdout);
}

static void die(const char *what) {
  fprintf(stderr, "harness: %s: %s\n", what, strerror(errno));
  exit(2);
}

static char *xstrdup(const char *s) {
  char *p = strdup(s);
  if (!p)
    die("strdup");
  return p;
}

static char *join(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *p = malloc(n);
  if (!p)
    die("malloc");
  snprintf(p, n, "%s%s%s", a, b, c);
  return p;
}

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static int run(char **argv) {
  pid_t pid = fork();
  if (pid < 0)
    die("fork");
  if (pid == 0) {
    execvp(argv[0], argv);
    fprintf(stderr, "harness: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) < 0)
    die("waitpid");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Reads the imports list: one path a line. */
static const char **readImports(const char *path, size_t *n) {
  *n = 0;
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  const char **list = NULL;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = 0;
    if (len == 0)
      continue;
    list = realloc(list, (*n + 1) * sizeof *list);
    if (!list)
      die("realloc");
    list[(*n)++] = xstrdup(line);
  }
  free(line);
  fclose(f);
  return list;
}

static int bySizeDesc(const void *a, const void *b) {
  const dtltoBitcodeNodeTy *x = *(dtltoBitcodeNodeTy *const *)a;
  const dtltoBitcodeNodeTy *y = *(dtltoBitcodeNodeTy *const *)b;
  if (x->ModuleSize != y->ModuleSize)
    return x->ModuleSize > y->ModuleSize ? -1 : 1;
  return x->TaskNumber < y->TaskNumber ? -1 : x->TaskNumber > y->TaskNumber;
}

int main(int argc, char **argv) {
  const char *lld = "ld.lld-22", *dir = ".", *mode = "normal";
  int thinLink = 1;
  const char **opts = calloc(argc + 1, sizeof *opts);
  size_t nopts = 0;
  char **linkArgs = calloc(argc + 1, sizeof *linkArgs);
  int nlinkArgs = 0;
  char **members = calloc(argc + 1, sizeof *members);
  int nmembers = 0;
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    if (!strcmp(argv[i], "--no-thin-link"))
      thinLink = 0;
    else if (i + 1 >= argc)
      break;
    else if (!strcmp(argv[i], "--lld"))
      lld = argv[++i];
    else if (!strcmp(argv[i], "--dir"))
      dir = argv[++i];
    else if (!strcmp(argv[i], "--link-arg"))
      linkArgs[nlinkArgs++] = argv[++i];
    else if (!strcmp(argv[i], "--member"))
      members[nmembers++] = argv[++i];
    else if (!strcmp(argv[i], "--opt"))
      opts[nopts++] = argv[++i];
    else if (!strcmp(argv[i], "--mode"))
      mode = argv[++i];
    else if (!strcmp(argv[i], "--output"))
      ++i; /* only for the plugin to read, as it reads a linker's -o */
    else
      break;
  }
  if (argc - i < 2) {
    fprintf(stderr, "usage: harness [options] PLUGIN OBJECT...\n");
    return 2;
  }
  const char *plugin = argv[i++];
  int nobj = argc - i;
  char **objs = argv + i;

  if (thinLink) {
    char **cmd = calloc(nobj + nlinkArgs + 8, sizeof *cmd);
    int k = 0;
    cmd[k++] = (char *)lld;
    cmd[k++] = "--thinlto-index-only";
    cmd[k++] = "--thinlto-emit-imports-files";
    cmd[k++] = "-o";
    cmd[k++] = join(dir, "/", "thin.out");
    for (int j = 0; j < nlinkArgs; j++)
      cmd[k++] = linkArgs[j];
    for (int j = 0; j < nobj; j++)
      cmd[k++] = objs[j];
    if (run(cmd) != 0) {
      fprintf(stderr, "harness: the thin link failed\n");
      return 2;
    }
  }

  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd))
    die("getcwd");
  /* The modules: the link's inputs, then the archive members. */
  int nmod = nobj + nmembers;
  const char **ids = calloc(nmod + 1, sizeof *ids);
  const char **paths = calloc(nmod + 1, sizeof *paths);
  for (int j = 0; j < nobj; j++)
    ids[j] = objs[j], paths[j] = objs[j];
  for (int j = 0; j < nmembers; j++) {
    char *eq = strchr(members[j], '=');
    if (!eq) {
      fprintf(stderr, "harness: --member wants ID=PATH\n");
      return 2;
    }
    *eq = 0;
    ids[nobj + j] = members[j];
    paths[nobj + j] = eq + 1;
  }
  dtltoBitcodeNodeTy **nodes = calloc(nmod + 1, sizeof *nodes);
  size_t nnodes = 0;
  for (int j = 0; j < nmod; j++) {
    char *shard = join(ids[j], ".thinlto.bc", "");
    if (!exists(shard))
      continue; /* nothing to compile (or an archive: see --member) */
    dtltoBitcodeNodeTy *n = calloc(1, sizeof *n);
    n->ModuleId = ids[j];
    n->ModulePath = paths[j][0] == '/' ? paths[j] : join(cwd, "/", paths[j]);
    struct stat st;
    n->ModuleSize = stat(n->ModulePath, &st) == 0 ? (size_t)st.st_size : 0;
    n->SummaryIndexPath = shard;
    char task[32];
    snprintf(task, sizeof task, ".%d.native.o", j + 1);
    char *base = basename(xstrdup(ids[j]));
    n->NativeObjectPath = join(dir, "/", join(base, task, ""));
    n->ImportsList = readImports(join(ids[j], ".imports", ""), &n->ImportsListSize);
    n->TargetTriple = "x86_64-pc-linux-gnu";
    n->TaskNumber = j + 1;
    nodes[nnodes++] = n;
  }
  qsort(nodes, nnodes, sizeof *nodes, bySizeDesc);

  void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "harness: dlopen: %s\n", dlerror());
    return 2;
  }
  dtltoPerformCodegenTy perform =
      (dtltoPerformCodegenTy)dlsym(h, "dtltoPerformCodegen");
  if (!perform) {
    fprintf(stderr, "harness: dlsym: %s\n", dlerror());
    return 2;
  }

  struct dtltoDiagContextTy diag = {0, 0};
  dtltoConfigTy cfg = {"thindist", &diag, emitError, emitWarn};
  const dtltoConfigTy *cfgp = &cfg;
  dtltoBitcodeNodeTy *const *nodesp = nodes;
  const char **argvp = opts;
  size_t argcp = nopts;

  if (!strcmp(mode, "null-cfg"))
    cfgp = NULL;
  else if (!strcmp(mode, "no-callbacks"))
    cfg.EmitError = cfg.EmitWarn = NULL;
  else if (!strcmp(mode, "null-nodes"))
    nodesp = NULL;
  else if (!strcmp(mode, "garbage-nodes"))
    nodesp = (dtltoBitcodeNodeTy *const *)(uintptr_t)0xdead0000;
  else if (!strcmp(mode, "null-node"))
    nodes[0] = NULL;
  else if (!strcmp(mode, "null-argv"))
    argvp = NULL, argcp = 3;
  else if (!strcmp(mode, "null-argv-elem"))
    argcp = nopts + 1; /* opts[nopts] is NULL */
  else if (!strcmp(mode, "null-module-id"))
    nodes[0]->ModuleId = NULL;
  else if (!strcmp(mode, "null-imports"))
    nodes[0]->ImportsList = NULL, nodes[0]->ImportsListSize = 2;
  else if (strcmp(mode, "normal")) {
    fprintf(stderr, "harness: unknown mode %s\n", mode);
    return 2;
  }
  if (!strcmp(mode, "null-node") || !strcmp(mode, "null-nodes") ||
      !strcmp(mode, "garbage-nodes") ||
      !strcmp(mode, "null-module-id") || !strcmp(mode, "null-imports")) {
    /* keep the node pointers printable below */
  } else {
    for (size_t j = 0; j < nnodes; j++)
      printf("object: %s\n", nodes[j]->NativeObjectPath);
  }

  int rc = perform(cfgp, nnodes,
                   (const dtltoBitcodeNodeTy *const *)nodesp, argcp, argvp);
  printf("return: %d\n", rc);
  printf("diagnostics: %d errors, %d warnings\n", diag.errors, diag.warnings);
  if (rc != 0)
    return 1;
  int missing = 0;
  for (size_t j = 0; j < nnodes; j++) {
    if (nodes[j] && !exists(nodes[j]->NativeObjectPath)) {
      printf("missing: %s\n", nodes[j]->NativeObjectPath);
      missing = 1;
    }
  }
  return missing ? 3 : 0;
}
