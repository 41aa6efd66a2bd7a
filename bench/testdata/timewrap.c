/* timewrap RECORD PROGRAM ARGS...: runs PROGRAM with ARGS, then appends its
 * wall time in nanoseconds (fork to exit, so PROGRAM's exec and start-up
 * count) to RECORD, and exits as PROGRAM did. The benchmark puts it between
 * lld and thindist to split a DTLTO link's wall time into lld's own part and
 * the distributor's; it adds one fork and exec (well under a millisecond). */
#include <stdio.h>
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
	int status;
	if (waitpid(pid, &status, 0) < 0)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &b);
	FILE *f = fopen(argv[1], "a");
	if (f) {
		fprintf(f, "%lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
		fclose(f);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}
