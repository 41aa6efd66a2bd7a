package usage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
)

// errNoFrames: /proc/PID/pagemap gives this process no page frame numbers
// (they are zero without CAP_SYS_ADMIN), so pages cannot be told apart.
var errNoFrames = errors.New("usage: /proc/PID/pagemap shows no page frame numbers (not root)")

// frames adds to set the page frame number of every resident page of
// process pid: anonymous pages, the pages of the files it maps, shared
// or not. A page that several processes map is one frame, so the size of
// the set over all of a link's processes is the memory they hold, each
// page counted once, which neither the sum of their RSS (a shared page
// for each process) nor of their PSS (a share of it, less when processes
// outside the set map it too) is. It reads /proc/PID/pagemap for every
// mapping that can hold pages, a walk of the process's page tables like
// /proc/PID/smaps_rollup's. A process that is gone adds nothing.
func frames(pid int, set map[uint64]struct{}) error {
	base := "/proc/" + strconv.Itoa(pid)
	maps, err := os.Open(base + "/maps")
	if err != nil {
		return nil
	}
	defer maps.Close()
	pm, err := os.Open(base + "/pagemap")
	if err != nil {
		return nil
	}
	defer pm.Close()
	page := uint64(os.Getpagesize())
	buf := make([]byte, 8*4096)
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[1], "---") { // PROT_NONE: never resident
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		for p := start / page; p < end/page; {
			n := min(end/page-p, uint64(len(buf)/8))
			k, _ := pm.ReadAt(buf[:8*n], int64(8*p))
			for i := 0; i+8 <= k; i += 8 {
				e := binary.LittleEndian.Uint64(buf[i:])
				if e&(1<<63) == 0 { // not present
					continue
				}
				pfn := e & (1<<55 - 1)
				if pfn == 0 {
					return errNoFrames
				}
				set[pfn] = struct{}{}
			}
			if k < int(8*n) { // [vsyscall] and the like cannot be read
				break
			}
			p += n
		}
	}
	return nil
}
