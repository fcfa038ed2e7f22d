// Package beneath opens files beneath a directory descriptor so that no
// symlink and no ".." met on the way can lead out of that directory, even
// when a path component is renamed or swapped for a symlink while the path
// is being resolved. It is the race-free half of a path check: a handler
// checks a path by name with the policy, opens it with this package beneath
// the allowlist root the policy names, confirms what it really opened
// (Path), and from then on uses only the descriptor.
//
// Open resolves with openat2(2) and RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS.
// On kernels without openat2 (before Linux 5.6) it walks the path one
// component at a time with openat(O_NOFOLLOW), reads each symlink it meets
// and walks the link's target in its place, refusing absolute targets and
// any ".." that would climb above the directory, as the kernel would.
//
// golang.org/x/sys/unix provides openat2, readlinkat and the constants;
// the calls package syscall has too go through syscall, whose wrappers the
// os package links anyway (each x/sys/unix one adds its own copy to every
// binary with files).
package beneath

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrOutside is returned when a path, a ".." or a symlink on the way would
// lead outside the directory it is resolved beneath.
var ErrOutside = errors.New("path leads outside its allowlist root")

const (
	// maxLinks bounds the symlinks one walk follows (the kernel's limit).
	maxLinks = 40
	// maxRetries bounds the retries of openat2 that a concurrent rename
	// made give up (EAGAIN): a rename loop must not spin a handler forever.
	maxRetries = 16
)

// walkOnly makes Open use the component walk: set once openat2 is found
// missing (ENOSYS), and by tests so that both paths are exercised.
var walkOnly atomic.Bool

// Open opens name, a relative path, beneath the directory dirfd with flags
// (O_CLOEXEC is always added; O_CREAT is not supported) and returns the new
// descriptor. name "" or "." is dirfd's directory itself.
func Open(dirfd int, name string, flags int) (int, error) {
	if name == "" {
		name = "."
	}
	flags |= unix.O_CLOEXEC
	if checksOff { // test builds only: testhooks.go
		return syscall.Openat(dirfd, name, flags, 0)
	}
	if !walkOnly.Load() {
		how := &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
		for try := 0; ; try++ {
			fd, err := unix.Openat2(dirfd, name, how)
			switch {
			case (err == unix.EAGAIN || err == unix.EINTR) && try < maxRetries:
				continue
			case err == unix.ENOSYS:
				walkOnly.Store(true)
			case err == unix.EXDEV:
				return -1, ErrOutside
			default:
				return fd, err
			}
			break
		}
	}
	return walk(dirfd, name, flags)
}

// walk is Open for kernels without openat2. Every component is opened
// with O_NOFOLLOW relative to the descriptor of the one before, so a
// component swapped for a symlink is seen as a symlink and resolved here,
// never by the kernel. ".." goes back to the directory the walk came from
// and may not go above dirfd.
func walk(dirfd int, name string, flags int) (int, error) {
	if strings.HasPrefix(name, "/") {
		return -1, ErrOutside
	}
	var dirs []int // the directories walked into below dirfd, innermost last
	defer func() {
		for _, fd := range dirs {
			syscall.Close(fd)
		}
	}()
	cur := func() int {
		if len(dirs) == 0 {
			return dirfd
		}
		return dirs[len(dirs)-1]
	}
	todo := strings.Split(name, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		last := len(todo) == 0
		switch c {
		case "", ".":
			if last {
				return syscall.Openat(cur(), ".", flags, 0)
			}
			continue
		case "..":
			if len(dirs) == 0 {
				return -1, ErrOutside
			}
			syscall.Close(dirs[len(dirs)-1])
			dirs = dirs[:len(dirs)-1]
			if last {
				return syscall.Openat(cur(), ".", flags, 0)
			}
			continue
		}
		fl := unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
		if last {
			fl = flags
		}
		fd, target, err := step(cur(), c, fl)
		if err != nil {
			return -1, err
		}
		if fd < 0 { // a symlink: walk its target in its place
			if links++; links > maxLinks {
				return -1, unix.ELOOP
			}
			if strings.HasPrefix(target, "/") {
				return -1, ErrOutside
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if last {
			return fd, nil
		}
		dirs = append(dirs, fd)
	}
	return syscall.Openat(cur(), ".", flags, 0) // not reached: Split returns at least one element
}

// step opens the single component c of dir with flags without following
// it. For a symlink it returns descriptor -1 and the link's target.
func step(dir int, c string, flags int) (int, string, error) {
	fd, err := syscall.Openat(dir, c, flags|unix.O_NOFOLLOW, 0)
	if err == nil {
		if flags&unix.O_PATH == 0 {
			return fd, "", nil // O_NOFOLLOW without O_PATH refuses a symlink
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			return -1, "", err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return fd, "", nil
		}
		syscall.Close(fd) // O_PATH|O_NOFOLLOW opened the link itself
	} else if err != unix.ELOOP && err != unix.ENOTDIR {
		return -1, "", err
	}
	// A symlink, or (ELOOP, ENOTDIR) maybe one. Whatever the link says
	// now is what gets walked and checked; a non-link keeps its error.
	buf := make([]byte, unix.PathMax)
	n, lerr := unix.Readlinkat(dir, c, buf)
	switch {
	case lerr != nil && err != nil:
		return -1, "", err
	case lerr != nil:
		return -1, "", lerr
	case n == len(buf):
		return -1, "", unix.ENAMETOOLONG
	}
	return -1, string(buf[:n]), nil
}

// MkdirAll makes the directory name (relative) beneath dirfd and every
// missing parent, like os.MkdirAll, and returns an O_PATH descriptor of
// it. Before each directory is created, allow is asked with the absolute
// path it will have (the path of its parent's descriptor, see Path, plus
// its name); an error from allow stops the walk and is returned as is.
func MkdirAll(dirfd int, name string, perm uint32, allow func(path string) error) (int, error) {
	const dirFlags = unix.O_PATH | unix.O_DIRECTORY
	if fd, err := Open(dirfd, name, dirFlags); err != unix.ENOENT {
		return fd, err // it exists (or cannot be reached at all)
	}
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			syscall.Close(cur)
		}
	}
	defer func() { closeCur() }()
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." {
			continue
		}
		fd, err := Open(cur, c, dirFlags)
		if err == unix.ENOENT {
			parent, perr := Path(cur)
			if perr != nil {
				return -1, perr
			}
			if err := allow(strings.TrimSuffix(parent, "/") + "/" + c); err != nil {
				return -1, err
			}
			if err := syscall.Mkdirat(cur, c, perm); err != nil && err != unix.EEXIST {
				return -1, err
			}
			fd, err = Open(cur, c, dirFlags)
		}
		if err != nil {
			return -1, err
		}
		closeCur()
		cur = fd
	}
	if cur == dirfd { // name was "" or "."
		return Open(dirfd, ".", dirFlags)
	}
	fd := cur
	cur = dirfd // keep it open for the caller
	return fd, nil
}

// Rel returns the absolute, clean path p relative to root, which must be
// p itself ("."), "/" or an ancestor of p; otherwise ErrOutside.
func Rel(root, p string) (string, error) {
	switch {
	case p == root:
		return ".", nil
	case root == "/" && strings.HasPrefix(p, "/"):
		return p[1:], nil
	case strings.HasPrefix(p, root+"/"):
		return p[len(root)+1:], nil
	}
	return "", ErrOutside
}

// Path returns the absolute path the kernel reports for fd (the link
// /proc/self/fd/N): where the opened object is now, whatever path led to
// it. A caller checks this against its allowlist before it uses fd.
func Path(fd int) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("descriptor " + strconv.Itoa(fd) + " is not a file (" + p + ")")
	}
	return p, nil
}
