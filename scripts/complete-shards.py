#!/usr/bin/env python3
"""complete-shards.py: the by-hand experiment behind docs/link.md, "Not
byte-identical to in-process" (issue 48). Not used by thindist.

A distributed ThinLTO backend's index shard has summaries only of its own
module's definitions and of what it imports, so a declaration of anything else
stays preemptible (GOT access in PIE code), where in-process ThinLTO marks it
dso_local from the whole link's index. This script completes each shard of a
separate thin link with a summary, attributed to the module itself (so that the
backend imports nothing more), for every symbol the module or a module it
imports from refers to and the shard lacks, when the definition's own summary
(in its module's shard) is live and dsoLocal; runs each backend on the
completed shard; and compares the object with lld's in-process one.

Usage, in the link's directory (archive members extracted there under lld's
names, "lib.a(m.o at OFFSET)", for the backends and for llvm-dis):
    clang-22 -flto=thin -fuse-ld=lld ... -Wl,--save-temps          # git.lto.*.o
    clang-22 -flto=thin -fuse-ld=lld ... \\
        -Wl,--thinlto-index-only=IDX/index.txt,--thinlto-prefix-replace=';IDX/'
    complete-shards.py IDX OUT git [MODULE...]
IDX is an absolute directory; OUT receives the completed shards (.ll, .bc) and
the objects; "git" is the stem of the in-process --save-temps objects
(<dir>/<stem>.lto.<name>[.o]). Without MODULEs, every module of index.txt.
Prints SAME or DIFF, the number of summaries added, and the module.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

LLVM_DIS, LLVM_AS, CLANG = "llvm-dis-22", "llvm-as-22", "clang-22"
BACKEND = ["-c", "--target=x86_64-pc-linux-gnu", "-O2", "-faddrsig", "-ffunction-sections",
           "-fdata-sections", "-fpic", "-Wno-unused-command-line-argument", "-x", "ir"]
MODULE_RE = re.compile(r'^\^(\d+) = module: \(path: "([^"]*)"', re.M)
SUMMARY_RE = re.compile(r'^\^\d+ = gv: \(guid: (\d+), summaries: \((\w+): \(module: \^(\d+), '
                        r'flags: \(linkage: (\w+),.*?live: (\d), dsoLocal: (\d)', re.M)
NAME_RE = re.compile(r'^\^\d+ = gv: \(name: "[^"]*"\) ; guid = (\d+)', re.M)


def dis(path):
    return subprocess.run([LLVM_DIS, path, "-o", "-"], capture_output=True, text=True,
                          check=True).stdout


def own_id(shard_text, module):
    return [k for k, v in MODULE_RE.findall(shard_text) if v == module][0]


def main():
    idx, out, stem, only = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    os.makedirs(out, exist_ok=True)
    modules = [line.rstrip("\n")[len(idx) + 1:] for line in open(os.path.join(idx, "index.txt"))]
    shards = {m: dis(os.path.join(idx, m + ".thinlto.bc")) for m in modules}
    # Definitions: GUID -> (kind, live, dsoLocal), from each module's own summaries.
    defs = {}
    for m, text in shards.items():
        own = own_id(text, m)
        for guid, kind, mod, linkage, live, dso in SUMMARY_RE.findall(text):
            if mod == own and linkage not in ("internal", "private", "available_externally"):
                defs[guid] = (kind, live, dso)
    refs = {}

    def referenced(m):
        if m not in refs:
            refs[m] = set(NAME_RE.findall(dis(m)))
        return refs[m]

    def job(m):
        text = shards[m]
        own = own_id(text, m)
        want = set()
        for _, path in MODULE_RE.findall(text):
            want |= referenced(path)
        have = set(re.findall(r'gv: \(guid: (\d+)', text))
        n = max(int(x) for x in re.findall(r'^\^(\d+)', text, re.M)) + 1
        added = []
        for guid in sorted(want - have):
            d = defs.get(guid)
            if not d or d[1] != "1" or d[2] != "1":
                continue
            body = ("varFlags: (readonly: 0, writeonly: 0, constant: 0)" if d[0] == "variable"
                    else "insts: 1")
            added.append(f'^{n} = gv: (guid: {guid}, summaries: ({d[0]}: (module: ^{own}, flags: '
                         '(linkage: external, visibility: default, notEligibleToImport: 0, live: 1, '
                         f'dsoLocal: 1, canAutoHide: 0, importType: definition), {body})))')
            n += 1
        base = os.path.join(out, m.replace("/", "_"))
        with open(base + ".ll", "w") as f:
            f.write(text + "\n".join(added) + "\n")
        subprocess.run([LLVM_AS, base + ".ll", "-o", base + ".bc"], check=True)
        subprocess.run([CLANG] + BACKEND + [m, "-fthinlto-index=" + base + ".bc", "-o", base + ".o"],
                       check=True)
        d, b = os.path.split(m)
        ref = os.path.join(d, f"{stem}.lto.{b}" + (".o" if "(" in b else ""))
        with open(base + ".o", "rb") as got, open(ref, "rb") as want_obj:
            return m, len(added), got.read() == want_obj.read()

    selected = [m for m in modules if not only or m in only]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(job, selected))
    for m, n, same in results:
        print("SAME" if same else "DIFF", n, m)
    print("total", len(results), "same", sum(1 for r in results if r[2]))


if __name__ == "__main__":
    main()
