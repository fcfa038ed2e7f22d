package fs

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/kilnworks/kiln/capabilities/internal/beneath"
	"github.com/kilnworks/kiln/runtime/policy"
)

// The file operations below take a path the policy has checked, resolved,
// and placed under an allowlist root. They open the root, resolve the rest
// beneath it, confirm the opened directory or file with the policy, and
// then use only descriptors, so a path component swapped for a symlink
// after the check cannot move a read or a write out of the allowlist.
// (Calls that package syscall has go through it, as in package beneath.)

var errNotText = errors.New("not UTF-8 text")

// readFile returns the content of the regular file resolved.
func readFile(pol *policy.Policy, resolved, root string) ([]byte, error) {
	rootfd, base, err := openRoot(root, false)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(rootfd)
	var fd int
	r, err := beneath.Rel(base, resolved)
	if err == nil {
		// O_NONBLOCK: opening a FIFO must not hang the node; it is
		// refused below as not a regular file.
		fd, err = beneath.Open(rootfd, r, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	}
	if err != nil {
		return nil, outside(policy.FSReadCheck, resolved, err)
	}
	f := os.NewFile(uintptr(fd), resolved)
	defer f.Close()
	if err := confirm(pol, policy.FSReadCheck, fd, ""); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, unix.EISDIR
	case !fi.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(data) {
		return nil, errNotText
	}
	return data, nil
}

// existingMode returns the permissions to give the file resolved: those
// of the file already there, 0644 for a new one. A directory in the way is
// an error, found before anything is accounted or created.
func existingMode(resolved, root string) (uint32, error) {
	perm := uint32(0o644)
	rootfd, base, err := openRoot(root, true)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(rootfd)
	r, err := beneath.Rel(base, resolved)
	if err != nil {
		return perm, nil // writeFile refuses it
	}
	if r == "." {
		return 0, unix.EISDIR
	}
	dirfd, err := beneath.Open(rootfd, filepath.Dir(r), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return perm, nil // the directory is missing (or in the way): writeFile says which
	}
	defer syscall.Close(dirfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, filepath.Base(r), &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return 0, unix.EISDIR
		case unix.S_IFREG:
			perm = st.Mode & 0o777
		}
	}
	return perm, nil
}

// writeFile replaces the file resolved with data: its parent directories
// are created beneath the root, each checked first; the data goes to a
// temp file in the parent's descriptor, renamed over the name in the same
// descriptor, so readers never see a half-written file.
func writeFile(pol *policy.Policy, resolved, root string, data []byte, perm uint32) error {
	rootfd, base, err := openRoot(root, true)
	if err != nil {
		return err
	}
	defer syscall.Close(rootfd)
	r, err := beneath.Rel(base, resolved)
	if err != nil {
		return outside(policy.FSWriteCheck, resolved, err)
	}
	if r == "." {
		return unix.EISDIR
	}
	dirfd, err := beneath.MkdirAll(rootfd, filepath.Dir(r), 0o755, allowWrite(pol))
	if err != nil {
		return outside(policy.FSWriteCheck, resolved, err)
	}
	defer syscall.Close(dirfd)
	name := filepath.Base(r)
	if err := confirm(pol, policy.FSWriteCheck, dirfd, name); err != nil {
		return err
	}
	return writeAtomic(dirfd, name, data, perm)
}

// createDir makes the directory resolved and its parents beneath the root.
func createDir(pol *policy.Policy, resolved, root string) error {
	rootfd, base, err := openRoot(root, true)
	if err != nil {
		return err
	}
	defer syscall.Close(rootfd)
	var fd int
	r, err := beneath.Rel(base, resolved)
	if err == nil {
		fd, err = beneath.MkdirAll(rootfd, r, 0o755, allowWrite(pol))
	}
	if err != nil {
		return outside(policy.FSWriteCheck, resolved, err)
	}
	defer syscall.Close(fd)
	return confirm(pol, policy.FSWriteCheck, fd, "")
}

// writeAtomic writes data to a new temp file in dirfd and renames it over
// name there. Both are single names in one directory descriptor: nothing
// is resolved again.
func writeAtomic(dirfd int, name string, data []byte, perm uint32) error {
	var tmp string
	var fd int
	var err error
	for range 10 { // O_EXCL: a name someone else holds is never reused
		tmp = "." + name + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
		fd, err = syscall.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			syscall.Unlinkat(dirfd, tmp)
		}
	}()
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(os.FileMode(perm))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := syscall.Renameat(dirfd, tmp, dirfd, name); err != nil {
		return err
	}
	renamed = true
	return nil
}

// openRoot opens the allowlist root (O_PATH) and returns it with its path.
// A write may find the root missing: then it opens the deepest existing
// ancestor instead, and MkdirAll checks every directory it creates below
// it against the allowlist, the root itself included.
func openRoot(root string, forWrite bool) (int, string, error) {
	for base := root; ; base = filepath.Dir(base) {
		fd, err := syscall.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != unix.ENOENT || !forWrite || base == "/" {
			return fd, base, err
		}
	}
}

// confirm checks the path the kernel reports for fd (joined with name,
// when fd is the directory of the object) against the allowlist of what.
func confirm(pol *policy.Policy, what string, fd int, name string) error {
	real, err := beneath.Path(fd)
	if err != nil {
		return err
	}
	if name != "" {
		real = filepath.Join(real, name)
	}
	return pol.FSConfirm(what, real)
}

// allowWrite checks each directory MkdirAll is about to create.
func allowWrite(pol *policy.Policy) func(string) error {
	return func(path string) error { return pol.FSConfirm(policy.FSWriteCheck, path) }
}

// outside turns an escape the resolution refused into a denial of what on
// path; other errors pass unchanged.
func outside(what, path string, err error) error {
	if errors.Is(err, beneath.ErrOutside) {
		return &policy.Denial{What: what, Target: path, Reason: "a symlink or '..' on the way leads outside the allowlist root"}
	}
	return err
}
