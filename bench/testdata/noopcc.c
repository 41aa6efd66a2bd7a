/* A no-op "compiler" for measuring a distributor's own overhead: it finds
 * "-o PATH" among its arguments and writes there the smallest valid ELF64
 * relocatable object (a header with no sections), which passes thindist's
 * ET_REL check, and does nothing else. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	const char *out = 0;
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "-o") == 0)
			out = argv[i + 1];
	if (!out)
		return 2;
	unsigned char h[64] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1 /* version */};
	h[16] = 1;            /* e_type = ET_REL */
	h[18] = 62;           /* e_machine = EM_X86_64 */
	h[20] = 1;            /* e_version */
	h[52] = 64;           /* e_ehsize */
	h[58] = 64;           /* e_shentsize */
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, h, sizeof h) != (ssize_t)sizeof h || close(fd) != 0)
		return 1;
	return 0;
}
