/*
 * thindist's fork-server shim. Loaded with LD_PRELOAD into a compiler that
 * thindist starts with THINDIST_FORKSERVER_FD set, it takes over
 * __libc_start_main: the dynamic loader has mapped and relocated every
 * shared library and run their constructors, but the program's main has not
 * run. From there it serves requests on the socket: each request forks a
 * child that becomes the compiler exactly as exec would have started it
 * (the job's argv, environment, working directory, stdout and stderr), but
 * without paying for loading and relocating libLLVM and libclang-cpp again.
 * Each child dies with the server (which dies with thindist), and shows its
 * own command line and environment in /proc, as an exec'd one would.
 *
 * Messages (little-endian, one per SOCK_SEQPACKET datagram):
 *   from the shim: u32 0, u32 pid                       hello, serving
 *                  u32 1, u32 id, u32 pid, u32 errno    started (pid 0: fork failed)
 *                  u32 2, u32 pid, u32 wait status,
 *                         u64 user us, u64 system us, u64 maxrss KiB   exited
 *   to the shim:   u32 id, u32 nice, cwd NUL, argv NUL... NUL, env NUL... NUL,
 *                  with SCM_RIGHTS [stdout fd, stderr fd]
 * The shim exits when thindist closes its end of the socket.
 *
 * THINDIST_FORKSERVER_INIT, when set, lists (space-separated) functions
 * without arguments that the server calls once before serving: see
 * preinit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* From <linux/prctl.h> (a stable ABI), so that the shim builds without
 * the kernel's headers. */
#ifndef PR_SET_MM
#define PR_SET_MM 35
#endif
#ifndef PR_SET_MM_MAP
#define PR_SET_MM_MAP 14
#endif
struct mm_map {
	uint64_t start_code, end_code, start_data, end_data, start_brk, brk, start_stack;
	uint64_t arg_start, arg_end, env_start, env_end;
	uint64_t *auxv;
	uint32_t auxv_size, exe_fd;
};

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *);

extern char **environ;

#define REQUEST_MAX (1 << 20)

static void put32(char **p, uint32_t v) { memcpy(*p, &v, 4); *p += 4; }
static void put64(char **p, uint64_t v) { memcpy(*p, &v, 8); *p += 8; }

/* split reads NUL-terminated strings from *s up to an empty one into a new
 * NULL-terminated array. */
static char **split(char **s, char *end, int *n) {
	int count = 0;
	for (char *p = *s; p < end && *p; p += strlen(p) + 1) count++;
	char **v = calloc(count + 1, sizeof *v);
	if (!v) return NULL;
	for (int i = 0; i < count; i++) {
		v[i] = *s;
		*s += strlen(*s) + 1;
	}
	(*s)++;
	*n = count;
	return v;
}

/* show_job makes /proc/self/cmdline (what ps and top show) and
 * /proc/self/environ read the job's argv and environment, which lie each in
 * one piece in the request buffer, as they would for an exec'd compiler:
 * otherwise every job shows the server's bare compiler path. PR_SET_MM_MAP
 * needs no privilege (only CONFIG_CHECKPOINT_RESTORE, which distributions
 * enable), but must be given the whole memory map: the rest is read back
 * from /proc/self/stat. On failure the job runs all the same. */
static void show_job(char *args, char *args_end, char *env, char *env_end) {
	char st[2048];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0) return;
	ssize_t n = read(fd, st, sizeof st - 1);
	close(fd);
	if (n <= 0) return;
	st[n] = 0;
	/* The command name (field 2) may hold anything: count fields from the
	 * last ')'. Field 3 (the state, a letter) follows it. */
	char *p = strrchr(st, ')');
	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ') return;
	p += 4;
	uint64_t f[52] = {0};
	for (int i = 4; i < 52 && *p; i++) {
		char *e;
		while (*p == ' ') p++;
		f[i] = strtoull(p, &e, 10);
		if (e == p) return; /* a field that is not a number: unknown format */
		p = e;
	}
	struct mm_map m = {
		.start_code = f[26], .end_code = f[27], .start_stack = f[28],
		.start_data = f[45], .end_data = f[46], .start_brk = f[47],
		.brk = (uint64_t)syscall(SYS_brk, 0),
		.arg_start = (uintptr_t)args, .arg_end = (uintptr_t)args_end,
		.env_start = (uintptr_t)env, .env_end = (uintptr_t)env_end,
		.auxv = NULL, .auxv_size = 0, .exe_fd = (uint32_t)-1,
	};
	prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof m, 0);
}

/* preinit calls, in the server, the initialisers every job would call
 * first thing in main: for clang, LLVM's target registrations
 * (LLVMInitialize<Target>{TargetInfo,Target,TargetMC,AsmPrinter,AsmParser},
 * which cc1_main and the driver call for every target built in). Done once
 * here, their work and the pages they write are shared by every child
 * instead of redone in each; the child's own calls then find each target
 * registered and return (LLVM allows this: TargetRegistry::RegisterTarget
 * skips a registered target, pass initialisers run under call_once). thindist
 * lists only what the executable itself imports, so a program that would
 * not call them is never made to. A name that does not resolve is skipped:
 * the child calls it itself, as without a server. */
static void preinit(const char *env) {
	char *list = env ? strdup(env) : NULL;
	if (!list) return;
	for (char *save = NULL, *name = strtok_r(list, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
		void (*fn)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, name);
		if (fn) fn();
	}
	free(list);
}

static void reap(int sock) {
	for (;;) {
		int st;
		struct rusage ru;
		pid_t pid = wait4(-1, &st, WNOHANG, &ru);
		if (pid <= 0) return;
		char out[36], *p = out;
		put32(&p, 2);
		put32(&p, (uint32_t)pid);
		put32(&p, (uint32_t)st);
		put64(&p, (uint64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec);
		put64(&p, (uint64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec);
		put64(&p, (uint64_t)ru.ru_maxrss);
		send(sock, out, sizeof out, MSG_NOSIGNAL);
	}
}

int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end) {
	start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
	const char *fdv = getenv("THINDIST_FORKSERVER_FD");
	if (!real) _exit(126);
	if (!fdv) return real(main, argc, argv, init, fini, rtld_fini, stack_end);
	int sock = atoi(fdv);
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
	char *buf = malloc(REQUEST_MAX);
	if (sfd < 0 || !buf) _exit(126);
	preinit(getenv("THINDIST_FORKSERVER_INIT"));
	{
		char hello[8], *p = hello;
		put32(&p, 0);
		put32(&p, (uint32_t)getpid());
		if (send(sock, hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello) _exit(0);
	}
	for (;;) {
		struct pollfd pf[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR) continue;
			_exit(126);
		}
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) < 0) { /* reap anyway */ }
			reap(sock);
		}
		if (!pf[0].revents) continue;

		char cbuf[CMSG_SPACE(2 * sizeof(int))];
		struct iovec iov = {buf, REQUEST_MAX};
		struct msghdr mh;
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof cbuf;
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n <= 0) _exit(0); /* thindist is done (or gone) */
		int fds[2] = {-1, -1};
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(2 * sizeof(int)))
				memcpy(fds, CMSG_DATA(c), sizeof fds);
		uint32_t id = 0;
		pid_t pid = -1;
		int err = EINVAL;
		char **nargv = NULL, **nenv = NULL;
		uint32_t niceness = 0;
		if (n > 8 && buf[n - 1] == 0 && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && fds[0] >= 0 && fds[1] >= 0) {
			memcpy(&id, buf, 4);
			memcpy(&niceness, buf + 4, 4);
			char *s = buf + 8, *end = buf + n;
			char *cwd = s;
			s += strlen(s) + 1;
			int na = 0, ne = 0;
			nargv = s < end ? split(&s, end, &na) : NULL;
			nenv = nargv && s < end ? split(&s, end, &ne) : NULL;
			if (nargv && nenv && na > 0) {
				pid_t server = getpid();
				char *args_end = nargv[na - 1] + strlen(nargv[na - 1]) + 1;
				char *env_start = ne > 0 ? nenv[0] : args_end + 1;
				char *env_end = ne > 0 ? nenv[ne - 1] + strlen(nenv[ne - 1]) + 1 : env_start;
				pid = fork();
				err = errno;
				if (pid == 0) {
					/* The job dies with the server, which dies with
					 * thindist: no compiler outlives a killed thindist.
					 * SIGTERM, as for an exec'd compiler, lets clang
					 * remove its temporary files. Had the server died
					 * before the prctl, nobody would send it. */
					prctl(PR_SET_PDEATHSIG, SIGTERM);
					if (getppid() != server) _exit(128 + SIGTERM);
					close(sock);
					close(sfd);
					sigprocmask(SIG_SETMASK, &old, NULL);
					setpgid(0, 0);
					if (niceness > 0) {
						/* A speculative job runs lower, as nice(1)
						 * would start it: relative to the server's
						 * priority, which is thindist's. */
						errno = 0;
						int cur = getpriority(PRIO_PROCESS, 0);
						int want = cur + (niceness > 39 ? 39 : (int)niceness);
						if (errno == 0) setpriority(PRIO_PROCESS, 0, want > 19 ? 19 : want);
					}
					if (chdir(cwd) != 0 || dup2(fds[0], 1) < 0 || dup2(fds[1], 2) < 0) _exit(127);
					if (fds[0] > 2) close(fds[0]);
					if (fds[1] > 2 && fds[1] != fds[0]) close(fds[1]);
					environ = nenv;
					show_job(nargv[0], args_end, env_start, env_end);
					return real(main, na, nargv, init, fini, rtld_fini, stack_end);
				}
				if (pid > 0) setpgid(pid, pid); /* whichever of the two runs first */
			}
		}
		free(nargv);
		free(nenv);
		if (fds[0] >= 0) close(fds[0]);
		if (fds[1] >= 0) close(fds[1]);
		char out[16], *p = out;
		put32(&p, 1);
		put32(&p, id);
		put32(&p, pid > 0 ? (uint32_t)pid : 0);
		put32(&p, pid > 0 ? 0 : (uint32_t)err);
		send(sock, out, sizeof out, MSG_NOSIGNAL);
	}
}
