/* timewrap RECORD PROGRAM ARGS...: runs PROGRAM with ARGS and appends to
 * RECORD one line: its wall time in nanoseconds (fork to exit, so PROGRAM's
 * exec and start-up count), its own CPU time and its children's (clock
 * ticks, from /proc/PID/stat once it has exited and before it is reaped),
 * its peak RSS in KiB, and the system part of its own CPU time (ticks);
 * then exits as PROGRAM did.
 *
 * The benchmark puts it between lld and thindist to split a DTLTO link's
 * wall time into lld's part and the distributor's, and in front of thindist
 * to measure its own CPU and memory. It exists because a process started
 * straight from the benchmark cannot report its own peak RSS: Go starts
 * children with vfork (CLONE_VM), and on exec Linux carries the high-water
 * RSS of the address space being left, the benchmark's own, into the
 * child's ru_maxrss. A real fork from this small program leaves only its
 * own few hundred KiB. It adds one fork and exec (well under a
 * millisecond). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		execv(argv[2], argv + 2);
		_exit(127);
	}
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &b);
	/* utime stime cutime cstime are fields 14-17; the command name (field
	 * 2) is parenthesised and may hold spaces, so count from its ')'. */
	long long ut = -1, st = -1, cut = -1, cst = -1;
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = 0;
		fclose(f);
		char *p = strrchr(buf, ')');
		if (p)
			sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld %lld %lld", &ut, &st, &cut, &cst);
	}
	int status;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) < 0)
		return 2;
	f = fopen(argv[1], "a");
	if (f) {
		fprintf(f, "%lld %lld %lld %ld %lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec),
			ut + st, cut + cst, ru.ru_maxrss, st);
		fclose(f);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}
