// Package plainfile reads and writes regular files with the fewest system
// calls: open, read or write, close. The os package also puts every file
// it opens in non-blocking mode and offers it to the network poller (two
// fcntl and an epoll_ctl that fails for a regular file): on the remote
// path, where thindist opens several files per action, those were a
// large share of its system calls. Errors are *fs.PathError, as os returns them
// (errors.Is(err, fs.ErrNotExist) holds for a missing file, fs.ErrExist
// for one that Create finds).
package plainfile

import (
	"io"
	"io/fs"
	"syscall"
	"time"
)

func open(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			if err != nil {
				return -1, &fs.PathError{Op: "open", Path: path, Err: err}
			}
			return fd, nil
		}
	}
}

func read(fd int, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// ReadFile returns the content of the file at path.
func ReadFile(path string) ([]byte, error) {
	b, _, err := ReadFileStamped(path)
	return b, err
}

// ReadFileStamped is ReadFile that also returns the file's stamp, taken
// before it was read.
func ReadFileStamped(path string) ([]byte, Stamp, error) {
	fd, err := open(path)
	if err != nil {
		return nil, Stamp{}, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, Stamp{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	stamp := stampOf(&st)
	// One byte more than the size, so that the read that finds the end
	// has room and needs no reallocation.
	b := make([]byte, 0, max(st.Size, 0)+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := read(fd, b[len(b):cap(b)])
		if err != nil {
			return nil, stamp, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, stamp, nil
		}
		b = b[:len(b)+n]
	}
}

// Stamp is what the file system says of a file's identity and last
// change: the device and inode, the size, and the modification and
// status-change times. A write changes the status-change time (ctime),
// which no process can set back, so two equal stamps of a path taken far
// enough apart in time from the write before them mean the same content
// (Racy tells when they are not).
type Stamp struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
}

func stampOf(st *syscall.Stat_t) Stamp {
	return Stamp{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// Racy reports whether a write made soon after the one that set s could
// leave the stamp unchanged: file systems keep times at a coarse
// granularity (the kernel's clock tick, or whole seconds on some), so a
// stamp whose ctime is within RacyWindow of when it was taken, at, proves
// nothing (git's "racily clean" entries).
func (s Stamp) Racy(at time.Time) bool { return at.UnixNano()-s.Ctime < int64(RacyWindow) }

// RacyWindow is how far a stamp's ctime must be from when the stamp was
// taken for the stamp to tell the content (Stamp.Racy): the coarsest
// common timestamp granularity (FAT's 2 s).
const RacyWindow = 2 * time.Second

// StampOf returns the stamp of the file at path (symbolic links
// followed, as open does), without reading it.
func StampOf(path string) (Stamp, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(path, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return Stamp{}, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		return stampOf(&st), nil
	}
}

func fstamp(fd int, path string) (Stamp, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return Stamp{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return stampOf(&st), nil
}

// Copy writes the content of the file at path to w, through buf, and
// returns its size and the file's stamp, taken before it is read.
func Copy(w io.Writer, path string, buf []byte) (int64, Stamp, error) {
	fd, err := open(path)
	if err != nil {
		return 0, Stamp{}, err
	}
	defer syscall.Close(fd)
	stamp, err := fstamp(fd, path)
	if err != nil {
		return 0, stamp, err
	}
	var total int64
	for {
		n, err := read(fd, buf)
		if err != nil {
			return total, stamp, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return total, stamp, nil
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return total, stamp, err
		}
		total += int64(n)
	}
}

// ReadHeadStamped is ReadHead that also returns the file's stamp, taken
// once the bytes are read: equal to a stamp taken before an earlier read
// (Copy), and not racy then, it says the file has not changed since.
func ReadHeadStamped(path string, b []byte) (int, Stamp, error) {
	fd, err := open(path)
	if err != nil {
		return 0, Stamp{}, err
	}
	defer syscall.Close(fd)
	got, err := readHead(fd, path, b)
	if err != nil {
		return got, Stamp{}, err
	}
	stamp, err := fstamp(fd, path)
	return got, stamp, err
}

// ReadHead reads up to len(b) bytes from the start of the file at path and
// returns how many it read (fewer only for a shorter file).
func ReadHead(path string, b []byte) (int, error) {
	fd, err := open(path)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	return readHead(fd, path, b)
}

func readHead(fd int, path string, b []byte) (int, error) {
	got := 0
	for got < len(b) {
		n, err := read(fd, b[got:])
		if err != nil {
			return got, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		got += n
	}
	return got, nil
}

// Create writes data to a new file at path with permissions perm (less the
// umask), failing if path exists. A failed write leaves the partial file:
// the caller removes it.
func Create(path string, data []byte, perm fs.FileMode) error {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(fd)
			return &fs.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	if err := syscall.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}
