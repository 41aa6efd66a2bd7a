"""Serial DTLTO distributor: the benchmark's stand-in for LLVM's reference
llvm/utils/dtlto/local.py, with the same behaviour: read the job file named by
the last argument and run common.args + job.args for each job, one after
another, failing on the first non-zero exit.

Two optional environment variables, used only in the benchmark's analysis run
(never in a timed one), record what the physical limit needs:
  BENCH_SERIAL_LOG   append "<seconds>\t<output>" for each job
  BENCH_SERIAL_KEEP  copy each job's outputs[0] to that directory as NNNNN.o
"""
import json
import os
import shutil
import subprocess
import sys
import time

def main():
    with open(sys.argv[-1]) as f:
        data = json.load(f)
    common = data["common"]["args"]
    log = os.environ.get("BENCH_SERIAL_LOG")
    keep = os.environ.get("BENCH_SERIAL_KEEP")
    logf = open(log, "a") if log else None
    for i, job in enumerate(data["jobs"]):
        start = time.perf_counter()
        subprocess.check_call(common + job["args"])
        if logf:
            logf.write("%.6f\t%s\n" % (time.perf_counter() - start, job["outputs"][0]))
        if keep:
            shutil.copyfile(job["outputs"][0], os.path.join(keep, "%05d.o" % i))
    if logf:
        logf.close()

if __name__ == "__main__":
    main()
