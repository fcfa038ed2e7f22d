package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Every refusal and error returns descriptor -1, never a number a careless
// caller could close or use (0, 1 and 2 are the process's stdio).
func TestRefusalsReturnNoDescriptor(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		for _, name := range []string{"..", "sub/../..", "/etc/passwd", "abs-in", "abs-out", "rel-out", "sub/up-out",
			"dir-out/secret", "magic", "loop", "missing", "file/x", "sub/missing/x"} {
			fd, err := Open(root, name, unix.O_RDONLY)
			if err == nil {
				unix.Close(fd)
				t.Errorf("%s: opened", name)
			} else if fd != -1 {
				t.Errorf("%s: %v with descriptor %d, want -1", name, err, fd)
			}
		}
		no := errors.New("no")
		for name, allow := range map[string]func(string) error{
			"sub/refused/x": func(string) error { return no },
			"dir-out/new":   func(string) error { return nil },
			"file/x/y":      func(string) error { return nil },
		} {
			fd, err := MkdirAll(root, name, 0o755, allow)
			if err == nil {
				unix.Close(fd)
				t.Errorf("MkdirAll %s: made", name)
			} else if fd != -1 {
				t.Errorf("MkdirAll %s: %v with descriptor %d, want -1", name, err, fd)
			}
		}
	})
}

// A chain of symlinks inside the root is followed up to the kernel's own
// limit of 40 and refused with ELOOP beyond it, in both modes alike.
func TestSymlinkChainLimit(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		// chain/0 -> ../file; chain/i -> i-1: opening chain/n follows n+1 links.
		must(t, os.Mkdir(filepath.Join(tr.root, "chain"), 0o755))
		must(t, os.Symlink("../file", filepath.Join(tr.root, "chain", "0")))
		for i := 1; i <= maxLinks; i++ {
			must(t, os.Symlink(strconv.Itoa(i-1), filepath.Join(tr.root, "chain", strconv.Itoa(i))))
		}
		if got, err := read(t, root, "chain/"+strconv.Itoa(maxLinks-1)); err != nil || got != "inside" {
			t.Errorf("%d links: %q, %v", maxLinks, got, err)
		}
		if fd, err := Open(root, "chain/"+strconv.Itoa(maxLinks), unix.O_RDONLY); err != unix.ELOOP || fd != -1 {
			t.Errorf("%d links: descriptor %d, %v; want ELOOP", maxLinks+1, fd, err)
		}
	})
}

// The last component opened O_PATH is followed like any other: the
// descriptor is that of the link's target, not of the link.
func TestOPathFollowsTheLastLink(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		fd, err := Open(root, "rel-in", unix.O_PATH)
		must(t, err)
		defer unix.Close(fd)
		if p, err := Path(fd); err != nil || p != filepath.Join(tr.root, "sub", "inner") {
			t.Errorf("Path = %q, %v; want the link's target", p, err)
		}
	})
}

// A directory someone else creates between the check and mkdir (EEXIST)
// is used, not an error: MkdirAll is as idempotent as os.MkdirAll.
func TestMkdirAllAcceptsAConcurrentCreate(t *testing.T) {
	both(t, func(t *testing.T) {
		tr := makeTree(t)
		root := openDir(t, tr.root)
		fd, err := MkdirAll(root, "sub/raced", 0o755, func(p string) error { return os.Mkdir(p, 0o755) })
		must(t, err)
		defer unix.Close(fd)
		if p, err := Path(fd); err != nil || p != filepath.Join(tr.root, "sub", "raced") {
			t.Errorf("Path = %q, %v", p, err)
		}
	})
}

// step, one component at a time, answers -1 with every error: a missing
// name, and a non-directory where a directory is wanted (which readlink
// then confirms is no link).
func TestStepErrorsReturnNoDescriptor(t *testing.T) {
	tr := makeTree(t)
	root := openDir(t, tr.root)
	for name, flags := range map[string]int{
		"missing": unix.O_PATH,
		"file":    unix.O_PATH | unix.O_DIRECTORY,
	} {
		fd, target, err := step(root, name, flags)
		if err == nil || fd != -1 || target != "" {
			t.Errorf("%s: descriptor %d, target %q, %v; want -1 and an error", name, fd, target, err)
		}
	}
}
